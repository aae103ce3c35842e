import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { AgentMail } from 'agentmail';
import { RehearsalFailureType, type RehearsedMessage } from '../../contract/rehearsal';
import {
  boundMessageText,
  collectionsFor,
  type Embedder,
  liveCollections,
  relevanceVerdict,
  type Retrieval,
  retrieveWithRelevance,
} from '../../knowledge';
import type { Db } from '../../lib/db';
import { recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import { skipReason, type SkipReason } from '../decide/reply-policy';
import type { OwnAddresses } from '../decide/own-addresses';
import { draftHolds } from '../draft/draft-check';
import { conversationOf, customerMailboxes } from '../draft/draft-request';
import { validDraft } from '../draft/draft-store';
import { HOLDING_REPLY, judgeAnswer } from '../draft/drafting/answer';
import type { DraftAnswer, Drafter, DraftRequest } from '../draft/drafting/drafter';
import { draftProblem } from '../../contract';
import { configurationHash, type Rehearsal } from './store';
import { claimResult, completeResult, messageAt, renewClaim, requireRehearsal, storedOutcome } from './store';
import { readCustomerMail, handoffBeforeDrafting } from '../draft/customer-mail';
import { rehearsalConfiguration, type RehearsalConfig } from './configuration';
import { readOrFail, type MailReader } from './reads';
import { answerLines, storable, type RehearsalResult } from './result';
import { rehearsedTurn } from './turns';

export interface RehearseDeps {
  db: Db;
  reader: MailReader;
  drafter: Drafter;
  own: OwnAddresses;
  embedder?: Embedder | null;
  config: RehearsalConfig;
}

/**
 * One message of a rehearsal: read it and its thread, decide as the live decision decides, take
 * its turn as the turn rules would, retrieve, draft once, judge the draft by the draft rules, and
 * store it all beside what the team actually sent. Calls nothing that writes anywhere but the
 * rehearsal's own rows: no send, label, AgentMail draft, ticket, notification or budget.
 */
export async function rehearseMessage(
  deps: RehearseDeps,
  input: { rehearsalId: string; position: number },
): Promise<RehearsedMessage> {
  const rehearsal = await requireRehearsal(deps.db, input.rehearsalId);
  const { messageId, threadId } = await messageAt(deps.db, input.rehearsalId, input.position);
  const stored = await storedOutcome(deps.db, input.rehearsalId, messageId);
  if (stored !== null) return stored;
  await sameConfiguration(deps, rehearsal);

  const started = Date.now();
  const ref = { inboxId: rehearsal.inboxId, messageId };
  const read = await readOrFail(() => deps.reader.message(ref.inboxId, messageId), `message ${messageId}`);
  const thread = await readOrFail(
    () => deps.reader.thread(ref.inboxId, read.threadId || threadId),
    `thread ${read.threadId || threadId}`,
  );
  Context.current().heartbeat();
  // The message as it arrived: the `replied` label our answer put on it later is not the message's.
  const message: AgentMail.Message = { ...read, labels: read.labels.filter((l) => l !== 'replied') };
  // The thread as it stood when the message arrived: the model must not read the team's answer.
  const asOf = thread.messages.filter(
    (m) => m.timestamp.getTime() <= message.timestamp.getTime() || m.messageId === messageId,
  );
  const base: Omit<RehearsalResult, 'elapsedMs'> = {
    threadId: message.threadId,
    subject: storable(message.subject ?? '', 1_000),
    text: storable(message.extractedText ?? message.text ?? ''),
    receivedAt: message.timestamp.toISOString(),
    draft: null,
    covers: [messageId],
    coveredBy: null,
    failure: null,
    team: teamAnswer(thread.messages, message, deps.config.REHEARSAL_ESCALATION_LABELS),
    usage: null,
    modelMs: null,
  };
  const finish = async (
    outcome: RehearsedMessage['outcome'],
    reason: string | null,
    result: Omit<RehearsalResult, 'elapsedMs'>,
    ownerToken: string | null,
  ): Promise<RehearsedMessage> => {
    const stored = await completeResult(
      deps.db,
      { rehearsalId: input.rehearsalId, ...ref, ownerToken },
      { outcome, reason, result: { ...result, elapsedMs: Date.now() - started } },
    );
    if (!stored) {
      const replay = await storedOutcome(deps.db, input.rehearsalId, messageId);
      if (replay !== null) return replay;
      throw ApplicationFailure.create({
        type: 'RehearsalInProgress',
        message: `another attempt took over message ${input.position} of rehearsal ${input.rehearsalId}`,
        nonRetryable: false,
      });
    }
    return { outcome, reason, replayed: false };
  };

  const skip = await decide(deps, rehearsal.inboxId, message);
  if (skip !== null) return finish('skipped', skip, base, null);
  const turn = rehearsedTurn(thread.messages, messageId, deps.config.REPLY_COALESCE_MS);
  if (turn.kind === 'covered') return finish('covered', null, { ...base, coveredBy: turn.by }, null);

  const collections = await liveCollections(
    deps.db,
    collectionsFor(ref.inboxId, deps.config.KNOWLEDGE_INBOX_COLLECTIONS),
  );
  const knowledge = collections.length > 0;
  // The same bound on the text, retrieval and relevance floor as the live draft (draft-reply.ts).
  const { text, cut: textCut } = boundMessageText(message.extractedText ?? message.text ?? '');
  const context = Context.current();
  const query = {
    collections,
    text: `${message.subject ?? ''}\n${text}`,
    limit: deps.config.KNOWLEDGE_TOP_K,
    signal: context.cancellationSignal,
    heartbeat: () => context.heartbeat(),
  };
  const retrieval: Retrieval = knowledge
    ? await retrieveWithRelevance(deps.db, { ...query, embedder: deps.embedder ?? null }).catch(() =>
        retrieveWithRelevance(deps.db, query),
      )
    : { sections: [], relevance: [] };
  const sections = retrieval.sections;
  const relevance = knowledge
    ? relevanceVerdict(retrieval.relevance, deps.config.KNOWLEDGE_RELEVANCE_FLOORS)
    : undefined;
  Context.current().heartbeat();
  const customer = customerMailboxes(message, deps.config);
  const conversation = conversationOf(message, asOf, customer);
  const articles = sections.map((s) => ({ id: s.id, title: s.title, heading: s.heading, text: s.body }));
  // The customer's language and attachments, read as the live draft reads them (customer-mail.ts):
  // an unsupported language or an unreadable attachment the message points at is a hand-off before
  // any drafter is asked.
  const mail = await readCustomerMail(
    { agentmail: deps.reader.attachments, config: deps.config },
    ref,
    message,
    text,
    context.cancellationSignal,
  );
  const early = handoffBeforeDrafting(mail, text);
  if (early !== null) return finish('handed-off', early.kind, base, null);
  const request: DraftRequest = {
    inboxId: ref.inboxId,
    messageId,
    subject: message.subject ?? '',
    text,
    timestamp: message.timestamp,
    thread: conversation.thread,
    othersLeftOut: conversation.othersLeftOut,
    textCut,
    knowledge,
    articles,
    language: mail.language,
    attachments: mail.attachments,
    ...(relevance ? { relevance } : {}),
  };

  const claim = await claimResult(deps.db, {
    rehearsalId: input.rehearsalId,
    ...ref,
    leaseMs: deps.config.OPERATION_LEASE_MS,
  });
  if (claim.kind === 'complete') return claim.stored;
  if (claim.kind === 'in-progress')
    throw ApplicationFailure.create({
      type: 'RehearsalInProgress',
      message: `another attempt is drafting message ${input.position} of rehearsal ${input.rehearsalId}; retrying once its lease has run out`,
      nonRetryable: false,
    });
  const { ownerToken } = claim;
  const keepAlive = setInterval(
    () => {
      Context.current().heartbeat();
      void renewClaim(deps.db, {
        rehearsalId: input.rehearsalId,
        messageId,
        ownerToken,
        leaseMs: deps.config.OPERATION_LEASE_MS,
      }).catch(() => undefined);
    },
    Math.max(500, Math.floor(deps.config.OPERATION_LEASE_MS / 3)),
  );
  try {
    // One line per drafter call, as the live draft logs it: ids only.
    log.info('rehearsal drafting', {
      rehearsalId: input.rehearsalId,
      position: input.position,
      drafter: deps.drafter.name,
    });
    const modelStarted = Date.now();
    let answer: DraftAnswer;
    try {
      answer = await deps.drafter.draft(request, { signal: Context.current().cancellationSignal });
    } catch (error) {
      if (Context.current().cancellationSignal.aborted) throw error; // the worker stops: the next attempt drafts
      return await finish(
        'model-failed',
        failureType(error),
        { ...base, failure: failureType(error), modelMs: Date.now() - modelStarted },
        ownerToken,
      );
    }
    const modelMs = Date.now() - modelStarted;
    const usage = answer.usage
      ? { ...answer.usage, estimated: false }
      : {
          inputTokens: estimateTokens(JSON.stringify(request)),
          outputTokens: estimateTokens(answer.reply),
          estimated: true,
        };
    const judged = judgeAnswer(answer, request);
    const approval =
      deps.config.APPROVAL_REQUIRED_INBOXES.includes('*') ||
      deps.config.APPROVAL_REQUIRED_INBOXES.includes(ref.inboxId.toLowerCase());
    const draft = (text: string, handoffReason: string | null, holds: string[]) => ({
      text: storable(text),
      drafter: deps.drafter.name,
      citations: judged.citations,
      considered: articles.map((a) => a.id),
      handoffReason: handoffReason === null ? null : storable(handoffReason, 1_000),
      holds,
      approval,
    });
    const drafted = { ...base, covers: turn.covers, usage, modelMs };
    if (judged.handoff !== null) {
      const usable = draftProblem(judged.reply) === null ? judged.reply.trim() : HOLDING_REPLY;
      return await finish(
        'handed-off',
        judged.handoff.kind,
        { ...drafted, draft: draft(usable, judged.handoff.reason, []) },
        ownerToken,
      );
    }
    let valid: string;
    try {
      valid = validDraft(judged.reply, deps.drafter.name);
    } catch (error) {
      return await finish('model-failed', failureType(error), { ...drafted, failure: failureType(error) }, ownerToken);
    }
    const holds = draftHolds(valid, {
      inboxId: ref.inboxId,
      allowedLinkDomains: deps.config.DRAFT_ALLOWED_LINK_DOMAINS,
      ownAddresses: deps.config.REPLYONCE_OWN_ADDRESSES,
      customer: [...customer],
      instructions: deps.drafter.instructionsFor?.(ref.inboxId) ?? null,
      customerText: `${message.subject ?? ''}\n${text}`,
      phoneRegion: deps.config.DRAFT_PHONE_REGION,
    });
    if (holds.length > 0)
      return await finish('held', holds.join('+'), { ...drafted, draft: draft(valid, null, holds) }, ownerToken);
    return await finish(
      'answered',
      approval ? 'approval' : null,
      { ...drafted, draft: draft(valid, null, []) },
      ownerToken,
    );
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * The live decision's checks (activities/decide/decide-reply.ts) that are a function of the message
 * and the configuration, in its order, with the message's own time as "now" (it is judged as it
 * would have been on arrival). The reply budget and the hourly ceiling count live replies and are
 * not rehearsed: a rehearsal reserves nothing.
 */
async function decide(deps: RehearseDeps, inboxId: string, message: AgentMail.Message): Promise<SkipReason | null> {
  const served = deps.config.REPLYONCE_INBOXES;
  if (served.length > 0 && !served.includes(inboxId.toLowerCase())) return 'inbox-not-allowed';
  const sender = senderOf(message);
  if (sender !== null && (await deps.own.isOwn(sender.normalized, inboxId))) return 'from-own-inbox';
  const reason = skipReason(message, { now: message.timestamp.getTime(), maxAgeMs: deps.config.REPLY_MAX_AGE });
  if (reason !== null) return reason;
  const recipient = replyRecipient(message, recipientPolicy(deps.config));
  if (sender === null || recipient === null || (await deps.own.isOwn(recipient.normalized, inboxId)))
    return 'no-valid-recipient';
  return null;
}

/** The next message of ours in the thread after this one: what the team actually answered. */
function teamAnswer(
  thread: readonly AgentMail.Message[],
  message: AgentMail.Message,
  escalationLabels: readonly string[],
): RehearsalResult['team'] {
  const next = [...thread]
    .filter(
      (m) =>
        m.labels.includes('sent') &&
        m.timestamp.getTime() >= message.timestamp.getTime() &&
        m.messageId !== message.messageId,
    )
    .sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime())[0];
  if (next === undefined) return null;
  const text = storable(next.extractedText ?? next.text ?? '');
  return {
    messageId: next.messageId,
    sentAt: next.timestamp.toISOString(),
    afterMs: next.timestamp.getTime() - message.timestamp.getTime(),
    text,
    lines: answerLines(text),
    escalated: next.labels.some((l) => escalationLabels.includes(l.toLowerCase())),
  };
}

/** The failure's type (DraftTimeout, DraftSchemaViolation, InvalidDraft…): a name, never a provider's text. */
function failureType(error: unknown): string {
  if (error instanceof ApplicationFailure && error.type) return error.type;
  const name = error instanceof Error ? error.name : 'unknown';
  return /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name) ? name : 'unknown';
}

/** About four characters a token: the estimate when a drafter reports no usage (the offline one). */
const estimateTokens = (text: string) => Math.ceil(text.length / 4);

/** Configurations checked lately, per rehearsal: the check costs a few queries, not one per message. */
const checked = new Map<string, number>();
const CHECK_EVERY_MS = 30_000;

async function sameConfiguration(deps: RehearseDeps, rehearsal: Rehearsal): Promise<void> {
  const last = checked.get(rehearsal.rehearsalId);
  if (last !== undefined && Date.now() - last < CHECK_EVERY_MS) return;
  const now = await rehearsalConfiguration(deps, rehearsal.inboxId);
  if (configurationHash(now) !== rehearsal.configurationHash)
    throw ApplicationFailure.create({
      type: RehearsalFailureType.ConfigurationChanged,
      message: `this worker's configuration (drafter, knowledge or rules) is not the one rehearsal ${rehearsal.rehearsalId} was started with: resume it with the same settings, or start another rehearsal`,
      nonRetryable: true,
    });
  checked.set(rehearsal.rehearsalId, Date.now());
}

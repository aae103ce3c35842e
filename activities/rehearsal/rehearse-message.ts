import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { AgentMail } from 'agentmail';
import { FailureType } from '../../contract';
import { RehearsalFailureType, type RehearsedMessage } from '../../contract/rehearsal';
import type { Embedder } from '../../knowledge';
import type { Db } from '../../lib/db';
import { recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import { skipReason, type SkipReason } from '../decide/reply-policy';
import type { OwnAddresses } from '../decide/own-addresses';
import { composeDraft, type DrafterCallObserver, readMail, retrieveForDraft } from '../draft/compose-draft';
import type { StoredDraft } from '../draft/draft-store';
import type { Drafter, DraftRequest } from '../draft/drafting/drafter';
import { configurationHash, type Rehearsal } from './store';
import { claimResult, completeResult, messageAt, renewClaim, requireRehearsal, storedOutcome } from './store';
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

  const found = await retrieveForDraft(deps, ref.inboxId, message);
  Context.current().heartbeat();
  // The customer's language and attachments, read as the live draft reads them (before the claim:
  // an attachment read that fails is retried at once, not after a lease).
  const composing = { ...deps, attachments: deps.reader.attachments };
  const mail = await readMail(composing, { ref, message, found });

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
    const call = drafterCall(deps, input);
    const drafted = () => ({ ...base, covers: turn.covers, ...(call.answered ?? { usage: null, modelMs: null }) });
    let composed: StoredDraft;
    try {
      composed = await composeDraft(composing, { ref, message, thread: asOf, found, mail, observer: call.observer });
    } catch (error) {
      // The model timed out, refused or answered outside the schema, or its text is no valid reply:
      // that message's outcome. Anything else (the worker stopping, a failure before the drafter
      // was asked or after it answered, such as Postgres away) is retried as the live draft is.
      const drafterFailed = call.startedAt !== null && call.answered === null;
      const invalidText = error instanceof ApplicationFailure && error.type === FailureType.InvalidDraft;
      if (Context.current().cancellationSignal.aborted || call.startedAt === null || !(drafterFailed || invalidText))
        throw error;
      const failure = failureType(error);
      return await finish(
        'model-failed',
        failure,
        call.answered === null ? { ...base, failure, modelMs: Date.now() - call.startedAt } : { ...drafted(), failure },
        ownerToken,
      );
    }
    // Handed off before any drafter was asked (language, attachment): no draft of the agent's to show.
    if (call.startedAt === null) return await finish('handed-off', composed.handoff?.kind ?? null, base, ownerToken);
    const approval =
      deps.config.APPROVAL_REQUIRED_INBOXES.includes('*') ||
      deps.config.APPROVAL_REQUIRED_INBOXES.includes(ref.inboxId.toLowerCase());
    const holds = composed.holds ?? [];
    const result = {
      ...drafted(),
      draft: {
        text: storable(composed.text),
        drafter: composed.drafter,
        citations: composed.citations ?? [],
        considered: composed.considered ?? [],
        handoffReason: composed.handoff ? storable(composed.handoff.reason, 1_000) : null,
        holds,
        approval,
      },
    };
    if (composed.handoff) return await finish('handed-off', composed.handoff.kind, result, ownerToken);
    if (holds.length > 0) return await finish('held', holds.join('+'), result, ownerToken);
    return await finish('answered', approval ? 'approval' : null, result, ownerToken);
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * The drafter's call as it happens, through the draft sequence's observer: its time and tokens are
 * the report's (the draft itself is the live path's, compose-draft.ts).
 */
function drafterCall(deps: RehearseDeps, input: { rehearsalId: string; position: number }) {
  const call: {
    startedAt: number | null;
    request: DraftRequest | null;
    answered: null | { modelMs: number; usage: NonNullable<RehearsalResult['usage']> };
    observer: DrafterCallObserver;
  } = {
    startedAt: null,
    request: null,
    answered: null,
    observer: {
      asking: (request) => {
        // One line per drafter call, as the live draft logs it: ids only.
        log.info('rehearsal drafting', {
          rehearsalId: input.rehearsalId,
          position: input.position,
          drafter: deps.drafter.name,
        });
        call.startedAt = Date.now();
        call.request = request;
      },
      answered: (answer) => {
        call.answered = {
          modelMs: Date.now() - (call.startedAt ?? Date.now()),
          usage: answer.usage
            ? { ...answer.usage, estimated: false }
            : {
                inputTokens: estimateTokens(JSON.stringify(call.request)),
                outputTokens: estimateTokens(answer.reply),
                estimated: true,
              },
        };
      },
    },
  };
  return call;
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

import { Context, log } from '@temporalio/activity';
import type { AgentMail } from 'agentmail';
import { draftProblem, type MessageRef } from '../../contract';
import {
  boundMessageText,
  collectionsFor,
  type Embedder,
  liveCollections,
  relevanceVerdict,
  type RelevanceVerdict,
  type RetrievedSection,
  type Retrieval,
  retrieveWithRelevance,
  type TextCut,
} from '../../knowledge';
import { holdingText } from '../../lib/acknowledgment-text';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import type { AttachmentSource } from './attachment-reader';
import * as customerMail from './customer-mail';
import type { CustomerMail, CustomerMailConfig } from './customer-mail';
import { draftHolds } from './draft-check';
import { conversationOf, customerMailboxes } from './draft-request';
import { validDraft, type StoredDraft } from './draft-store';
import { judgeAnswer } from './drafting/answer';
import type { DraftAnswer, Drafter, DraftRequest } from './drafting/drafter';

/**
 * The draft sequence, once: what the live draft (draft-reply.ts) and a rehearsal
 * (activities/rehearsal/rehearse-message.ts) both do with a message, so a rehearsal cannot drift
 * from the path it imitates. Two steps, because the live draft keys its operation on what
 * retrieval found: {@link retrieveForDraft} before the operation is claimed, {@link composeDraft}
 * inside it (the hand-offs decided before any drafter is asked, the drafter's call, the judgement
 * of its answer, the draft rules, then the links to the cited articles and the signature).
 */

/** What retrieval found for a message, with the bounded text everything after it reads. */
export interface DraftKnowledge {
  /** The message's text cut at MESSAGE_TEXT_MAX_CHARS (issue 39): what is searched and shown to the model. */
  text: string;
  textCut: TextCut | null;
  /** The inbox's synced collections; none: the inbox has no knowledge base. */
  collections: string[];
  knowledge: boolean;
  sections: RetrievedSection[];
  /** Set with a knowledge base: whether the best article is below the relevance floor. */
  relevance: RelevanceVerdict | undefined;
}

export type RetrievalConfig = Pick<
  ActivityConfig,
  'KNOWLEDGE_INBOX_COLLECTIONS' | 'KNOWLEDGE_TOP_K' | 'KNOWLEDGE_RELEVANCE_FLOORS'
>;

export async function retrieveForDraft(
  deps: { db: Db; embedder?: Embedder | null | undefined; config: RetrievalConfig },
  inboxId: string,
  message: Pick<AgentMail.Message, 'subject' | 'extractedText' | 'text'>,
): Promise<DraftKnowledge> {
  // What one message may cost is bounded (issue 39): the text searched and shown to the model is
  // cut at MESSAGE_TEXT_MAX_CHARS, and the cut is said to the model and recorded with the draft.
  const { text, cut: textCut } = boundMessageText(message.extractedText ?? message.text ?? '');
  const collections = await liveCollections(deps.db, collectionsFor(inboxId, deps.config.KNOWLEDGE_INBOX_COLLECTIONS));
  const knowledge = collections.length > 0;
  const context = Context.current();
  const query = {
    collections,
    text: `${message.subject ?? ''}\n${text}`,
    limit: deps.config.KNOWLEDGE_TOP_K,
    // Retrieval runs before the operation's own heartbeat: it heartbeats and honours cancellation itself.
    signal: context.cancellationSignal,
    heartbeat: context.info.isLocal ? undefined : () => context.heartbeat(),
  };
  const retrieval: Retrieval = knowledge
    ? await retrieveWithRelevance(deps.db, { ...query, embedder: deps.embedder ?? null }).catch(
        async (error: unknown) => {
          if (!deps.embedder || context.cancellationSignal.aborted) throw error;
          // The embedding service is down: the text ranking alone (a changed ranking is a changed request).
          log.warn('embeddings unavailable; retrieving by full-text search alone', { error: String(error) });
          return retrieveWithRelevance(deps.db, query);
        },
      )
    : { sections: [], relevance: [] };
  const relevance = knowledge
    ? relevanceVerdict(retrieval.relevance, deps.config.KNOWLEDGE_RELEVANCE_FLOORS)
    : undefined;
  return { text, textCut, collections, knowledge, sections: retrieval.sections, relevance };
}

export interface ComposeDraftDeps {
  db: Db;
  drafter: Drafter;
  config: Pick<
    ActivityConfig,
    'DRAFT_ALLOWED_LINK_DOMAINS' | 'DRAFT_PHONE_REGION' | 'REPLYONCE_OWN_ADDRESSES' | 'REPLYONCE_REPLY_TO_DOMAINS'
  > &
    CustomerMailConfig;
}

/** What the caller learns of the drafter's call as it happens: the live draft logs it, a rehearsal times and counts it. */
export interface DrafterCallObserver {
  /** Right before the drafter is asked: once per drafter (model) call. */
  asking?(request: DraftRequest): void;
  /** The drafter's answer, before it is judged. */
  answered?(answer: DraftAnswer): void;
}

export interface ComposeDraftInput {
  ref: MessageRef;
  message: AgentMail.Message;
  /** The thread's messages as the drafter may see them (a rehearsal: as the thread stood then). */
  thread: readonly AgentMail.Message[];
  found: DraftKnowledge;
  /** The customer's language and attachments ({@link readMail}). */
  mail: CustomerMail;
  observer?: DrafterCallObserver;
}

/** The customer's language and attachments, read before drafting (customer-mail.ts). */
export function readMail(
  deps: { attachments: AttachmentSource; config: CustomerMailConfig },
  input: Pick<ComposeDraftInput, 'ref' | 'message' | 'found'>,
): Promise<CustomerMail> {
  return customerMail.readCustomerMail(
    { agentmail: deps.attachments, config: deps.config },
    input.ref,
    input.message,
    input.found.text,
    Context.current().cancellationSignal,
  );
}

/**
 * The draft of a reply to one message, as it is stored: a hand-off decided before any drafter is
 * asked (a language the team does not answer, an attachment nobody can read), else the drafter's
 * answer judged (a hand-off the model asked for, a bad or missing citation), checked by the draft
 * rules (holds) and finished with links to the cited articles and the signature. A drafter's
 * failure and an invalid text (`InvalidDraft`) are thrown: the caller decides what they mean.
 */
export async function composeDraft(deps: ComposeDraftDeps, input: ComposeDraftInput): Promise<StoredDraft> {
  const { ref, message, found, mail } = input;
  const { text, textCut, knowledge, sections, relevance } = found;
  const customer = customerMailboxes(message, deps.config);
  const { thread: earlier, othersLeftOut, read } = conversationOf(message, input.thread, customer);
  // What the reply answers besides this message, kept with the draft (ask-turn.ts reads it).
  const answers = read.length > 0 ? { read } : {};
  const articles = sections.map((s) => ({ id: s.id, title: s.title, heading: s.heading, text: s.body }));
  const finish = (reply: string, citations: string[]) =>
    customerMail.finishedReply(deps, { inboxId: ref.inboxId, reply, sections, citations });
  const considered = knowledge ? { considered: articles.map((a) => a.id) } : {};
  const early = customerMail.handoffBeforeDrafting(
    mail,
    { subject: message.subject ?? '', text },
    { topics: customerMail.handoffTopicsFor(deps.config), learned: customerMail.learnedHandoffsFor(deps.config) },
  );
  if (early !== null) {
    // Decided without a drafter: a person answers; the holding text is theirs to replace.
    const { text: holding } = await finish(holdingText(mail.language.reply ?? mail.language.detected), []);
    const citations = knowledge ? { citations: [] } : {};
    return {
      text: holding,
      drafter: deps.drafter.name,
      ...citations,
      ...considered,
      handoff: early,
      ...(textCut ? { textCut } : {}),
      ...customerMail.mailRecord(mail),
      ...answers,
    };
  }
  const request: DraftRequest = {
    inboxId: ref.inboxId,
    messageId: ref.messageId,
    subject: message.subject ?? '',
    text,
    timestamp: message.timestamp,
    thread: earlier,
    othersLeftOut,
    textCut,
    knowledge,
    articles,
    language: mail.language,
    attachments: mail.attachments,
    ...(relevance ? { relevance } : {}),
  };
  input.observer?.asking?.(request);
  const answer = await deps.drafter.draft(request, { signal: Context.current().cancellationSignal });
  input.observer?.answered?.(answer);
  const judged = judgeAnswer(answer, request);
  const knowledgeFields = {
    ...(knowledge ? { citations: judged.citations, considered: articles.map((a) => a.id) } : {}),
    ...(textCut ? { textCut } : {}),
  };
  if (judged.handoff !== null) {
    // Never sent without a person; an unusable reply is replaced by a neutral holding text a reviewer can edit.
    const usable =
      draftProblem(judged.reply) === null
        ? judged.reply.trim()
        : holdingText(mail.language.reply ?? mail.language.detected);
    const finished = await finish(usable, judged.handoff.kind === 'bad-citation' ? [] : judged.citations);
    return {
      text: finished.text,
      drafter: deps.drafter.name,
      ...knowledgeFields,
      handoff: judged.handoff,
      ...customerMail.mailRecord(mail),
      ...answers,
      ...(finished.cited.length > 0 ? { cited: finished.cited } : {}),
    };
  }
  const valid = validDraft(judged.reply, deps.drafter.name);
  const holds = draftHolds(valid, {
    inboxId: ref.inboxId,
    allowedLinkDomains: deps.config.DRAFT_ALLOWED_LINK_DOMAINS,
    ownAddresses: deps.config.REPLYONCE_OWN_ADDRESSES,
    customer: [...customer],
    instructions: deps.drafter.instructionsFor?.(ref.inboxId) ?? null,
    customerText: `${message.subject ?? ''}\n${text}`,
    phoneRegion: deps.config.DRAFT_PHONE_REGION,
  });
  // Links to the cited articles and the signature come after the check: they are ours, not the model's.
  const finished = await finish(valid, judged.citations);
  return {
    text: finished.text,
    drafter: deps.drafter.name,
    ...knowledgeFields,
    ...(holds.length > 0 ? { holds } : {}),
    ...customerMail.mailRecord(mail),
    ...answers,
    ...(finished.cited.length > 0 ? { cited: finished.cited } : {}),
  };
}

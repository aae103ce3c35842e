import { ApplicationFailure, log } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import {
  type HoldRule,
  type MessageRef,
  OperationKind,
  type OperationReport,
  RetryableFailureType,
} from '../../contract';
import { type Embedder, retrievalRefs } from '../../knowledge';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { requestHash } from '../../lib/hashing';
import type { StoredDraft } from './draft-store';
import type { HandoffKind } from './drafting/answer';
import type { Drafter } from './drafting/drafter';
import { composeDraft, readMail, retrieveForDraft } from './compose-draft';
import { fetchMessage, fetchThread } from '../agentmail/reads';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import { anyActiveReviewerFor } from '../../review/reviewers';
import type { CustomerMailConfig } from './customer-mail';

export interface DraftInput extends MessageRef {
  /** The draft's operation key (…/draft/v1), derived by the workflow. */
  key: string;
}

export interface DraftOutcome {
  characters: number;
  /** The rules the drafted text tripped (activities/draft/draft-check.ts): non-empty, a person must approve it. */
  holds: HoldRule[];
  /** The ids of the knowledge articles the reply cites (never their text). */
  citations: string[];
  /**
   * Set when the drafter did not know: the reply is not sent automatically. `route` is where a
   * hand-off goes in an inbox that needs no approval (HANDOFF); approval inboxes always review.
   * The reason itself stays in the operation store (it is the model's words).
   */
  handoff: null | { kind: HandoffKind; route: 'review' | 'ticket' };
  /**
   * The customer's language as an ISO 639-1 code (`de`), null when it could not be named (or the
   * draft was stored before languages were): the value of the `CustomerLanguage` search attribute.
   */
  language: string | null;
  operation: OperationReport;
}

export interface DraftDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  drafter: Drafter;
  /** Optional embeddings re-ranking the text-search candidates; null: full-text search alone. */
  embedder?: Embedder | null;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<
    ActivityConfig,
    | 'OPERATION_LEASE_MS'
    | 'KNOWLEDGE_INBOX_COLLECTIONS'
    | 'KNOWLEDGE_TOP_K'
    | 'KNOWLEDGE_RELEVANCE_FLOORS'
    | 'HANDOFF'
    | 'DRAFT_ALLOWED_LINK_DOMAINS'
    | 'DRAFT_PHONE_REGION'
    | 'REPLYONCE_OWN_ADDRESSES'
    | 'REPLYONCE_REPLY_TO_DOMAINS'
    | keyof CustomerMailConfig
  >;
}

/**
 * Drafts the reply once and stores the text under the draft key before any send. Only the
 * key, a length and article ids go back to the workflow: drafted text stays out of Temporal's history.
 *
 * With a knowledge base the retrieval runs inside this one operation: the articles found (ids,
 * versions and ranks, never text) are part of its request, so the hash changes when the knowledge
 * does. A draft already stored is replayed whatever the knowledge says now (the message was
 * answered); one never finished under other knowledge is drafted afresh.
 */
export async function draftReply(deps: DraftDeps, input: DraftInput): Promise<DraftOutcome> {
  const { key, ...ref } = input;
  const done = await deps.store.completed<StoredDraft>(key, OperationKind.draft);
  if (done !== undefined)
    return await outcomeOf(deps, ref, done, { key, kind: OperationKind.draft, state: 'replayed' });

  const message = await fetchMessage(deps.agentmail, ref);
  const found = await retrieveForDraft(deps, ref.inboxId, message);
  const { collections, knowledge, sections, relevance } = found;
  // Without a knowledge base the request is what it always was, so drafts stored before keep their hash.
  const request = {
    inboxId: ref.inboxId,
    messageId: ref.messageId,
    ...(knowledge
      ? {
          knowledge: {
            collections,
            articles: retrievalRefs(sections),
            // Only when below, so requests above the floor keep the hash they had before the floor.
            ...(relevance?.below ? { belowRelevanceFloor: true } : {}),
          },
        }
      : {}),
  };
  await supersedeUnfinished(deps.db, key, requestHash(request));

  const outcome = await runOperation<StoredDraft>(
    deps.store,
    { key, kind: OperationKind.draft, request, leaseMs: deps.config.OPERATION_LEASE_MS },
    async () => {
      const thread = await fetchThread(deps.agentmail, ref.inboxId, message.threadId);
      const composing = { ...deps, attachments: deps.agentmail };
      const mail = await readMail(composing, { ref, message, found });
      return composeDraft(composing, {
        ref,
        message,
        thread: thread.messages,
        found,
        mail,
        observer: {
          // One line per drafter (model) call: operators and the crash tests count calls by it.
          asking: (drafting) => {
            log.info('drafting reply', {
              operationKey: key,
              drafter: deps.drafter.name,
              articles: drafting.articles.length,
            });
          },
        },
      });
    },
  );
  return await outcomeOf(deps, ref, outcome.result, outcome.operation);
}

async function outcomeOf(
  deps: DraftDeps,
  ref: MessageRef,
  draft: StoredDraft,
  operation: OperationReport,
): Promise<DraftOutcome> {
  return {
    characters: draft.text.length,
    holds: draft.holds ?? [],
    citations: citationsForHistory(draft),
    handoff: draft.handoff ? { kind: draft.handoff.kind, route: await handoffRoute(deps, ref.inboxId) } : null,
    language: draft.language?.detected ?? null,
    operation,
  };
}

/** At most this many citations reach history: more than a reply's worth of articles (KNOWLEDGE_TOP_K is 5 by default). */
export const MAX_CITATIONS_IN_HISTORY = 20;
/** An article id longer than this is no id of ours (sync makes them from file paths). */
export const MAX_CITATION_LENGTH = 200;

/**
 * The citations the workflow may see (its history and the Web UI show them): only ids of articles
 * the drafter was given, bounded in count and length. The model's citation strings are its words,
 * and a prompt-injected "cite 'card 4111…'" would otherwise carry customer text into history; what
 * it cited besides stays in the stored draft (the ticket note and the hand-off reason say it).
 */
export function citationsForHistory(draft: Pick<StoredDraft, 'citations' | 'considered'>): string[] {
  const given = new Set(draft.considered ?? []);
  return [...new Set(draft.citations ?? [])]
    .filter((id) => given.has(id) && id.length <= MAX_CITATION_LENGTH)
    .slice(0, MAX_CITATIONS_IN_HISTORY);
}

/**
 * Where a hand-off goes in an inbox that needs no approval: HANDOFF when set; otherwise to review
 * when somebody may review this inbox (a reviewer who is not revoked, of every inbox or of this
 * one), else to a ticket, where a person sees it. A reviewer of other inboxes does not count: the
 * hand-off would wait where nobody may open it. Decided by this run (its result is in history); a
 * later run decides again, as with every other setting.
 */
export async function handoffRoute(
  deps: { db: Pick<Db, 'query'>; config: Pick<ActivityConfig, 'HANDOFF'> },
  inboxId: string,
): Promise<'review' | 'ticket'> {
  if (deps.config.HANDOFF) return deps.config.HANDOFF;
  return (await anyActiveReviewerFor(deps.db, inboxId)) ? 'review' : 'ticket';
}

/**
 * A draft row left unfinished under another request (a crash, or a final failure, before the
 * knowledge changed) gives way to this one: the message was never answered, so it is drafted
 * afresh with what the knowledge base says now. A live lease under another request is another
 * attempt still drafting: retried, never a conflict.
 */
async function supersedeUnfinished(db: Db, key: string, hash: string): Promise<void> {
  const removed = await db.query<{ status: string }>(
    `DELETE FROM operations
      WHERE operation_key = $1 AND kind = 'draft' AND status <> 'complete' AND request_hash <> $2
        AND (status = 'failed' OR lease_until IS NULL OR lease_until <= now())
      RETURNING status`,
    [key, hash],
  );
  if (removed.rowCount) return;
  const live = await db.query(
    `SELECT 1 FROM operations
      WHERE operation_key = $1 AND kind = 'draft' AND status = 'processing' AND request_hash <> $2`,
    [key, hash],
  );
  if (live.rowCount)
    throw ApplicationFailure.create({
      type: RetryableFailureType.ReplyInProgress,
      message: `another attempt is drafting ${key} with other knowledge; retrying once it has finished`,
      nonRetryable: false,
    });
}

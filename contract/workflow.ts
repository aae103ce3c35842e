/**
 * The contract between the ingress, operators and the workflow: names, inputs, results,
 * search attributes, queries. Kept free of I/O so workflow code can import it.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

export const INBOUND_MESSAGE_WORKFLOW = 'inboundMessageWorkflow';

export interface InboundMessageInput {
  inboxId: string;
  messageId: string;
  /** The webhook event that started it, for the logs; absent on manual starts and replays. */
  eventId?: string;
}

/**
 * Where a message stands. Four wait for a person's verdict: `awaiting_approval` (an inbox that
 * requires approval), `escalated` (the same, past APPROVAL_TIMEOUT_MS), `held` (a drafted reply
 * tripped a rule — a link, an address, an echo of the instructions — in an inbox that needs no
 * approval: it is never sent unless a person approves) and `handed_off` when HANDOFF=review.
 * `answered-together`: covered by a later message's reply in the same thread.
 */
export type ReplyStatus =
  | 'deciding'
  | 'drafting'
  | 'awaiting_approval'
  | 'escalated'
  | 'held'
  | 'handed_off'
  | 'sending'
  | 'sent'
  | 'rejected'
  | 'skipped'
  | 'failed'
  /** Waiting for the thread's turn (conversations: one message of a thread at a time). */
  | 'waiting_turn'
  /** Covered by a later message's reply: the burst was answered once (CoveredBy names that message). */
  | 'answered-together'
  /**
   * The customer asked to be forgotten (privacy/erase.ts): an activity answered `Erased` and the
   * run ended without drafting, sending, ticketing or notifying anything more.
   */
  | 'erased';

/**
 * The rules a drafted reply (the model's, never a reviewer's edit) is checked against before it may
 * go out unread (activities/draft/draft-check.ts): a link to a host outside DRAFT_ALLOWED_LINK_DOMAINS,
 * an address that is neither ours nor the customer's, a run of 12 or more words of the instructions.
 */
export type HoldRule = 'link' | 'address' | 'instructions' | 'phone';

/** What each rule is called where a person reads it: the review's reason, the ticket, `SkipReason`. */
export const HOLD_RULES: Readonly<Record<HoldRule, string>> = {
  link: 'a link outside the allowed domains',
  address: "an address that is neither ours nor the customer's",
  instructions: 'an echo of the inbox instructions',
  phone: 'a phone number neither in the instructions nor in the customer message',
};

export type InboundMessageResult =
  | {
      status: 'sent';
      replyMessageId: string;
      replyThreadId: string;
      ticketId: string | null;
      replayed: boolean;
      replyVersion: number;
      /** The inbound messages this reply answers, oldest first, this message last (a burst answered once). */
      covers: string[];
    }
  | { status: 'rejected'; ticketId: string | null; covers: string[] }
  /** HANDOFF=ticket: the draft handed the message to a person; the ticket holds the reason, nothing was sent. */
  | { status: 'handed_off'; ticketId: string | null; covers: string[] }
  /** A later message of the same thread answered this one with its own reply. */
  | { status: 'answered-together'; coveredBy: string; ticketId: string | null }
  | { status: 'skipped'; reason: string; ticketId: string | null }
  /** The message was erased (FailureType.Erased): nothing of it is kept, nothing more was done. */
  | { status: 'erased' };

/**
 * A person's verdict on a drafted reply, from the admin route, the desk, the Web UI or
 * `temporal workflow update|signal`. Accepted only while a verdict is awaited (ReplyStatus
 * awaiting_approval, escalated, held, or handed_off under review), for the revision awaiting it,
 * and only once; anything else is refused (`ReviewRefused`). `text` replaces the drafted text: a
 * changed intent, so it is sent under the next key version (…/reply/v2), never under v1's key.
 * Note that a signal's or update's payload is kept in the workflow's history: an edited text
 * passes through it.
 */
export interface ReviewInput {
  verdict: 'approve' | 'reject';
  /** The draft's revision the verdict judges, as `reviewState` showed it: a stale one is refused. */
  revision: number;
  text?: string;
  /**
   * The reviewer's id, set by the API or the desk from the verified credential (review/reviewers.ts),
   * never taken from a request body. Sent straight through Temporal, it is whatever the operator typed.
   */
  reviewer: string;
}

export type ReviewVerdict = Pick<ReviewInput, 'verdict' | 'revision' | 'reviewer'>;

/** Answered once the workflow accepted the verdict; a refusal is a failed Update (`ReviewRefused`, `InvalidReview`). */
export const reviewUpdate = defineUpdate<{ accepted: true; revision: number }, [ReviewInput]>('review');
/** The same, fire and forget (what the Web UI's "Send a Signal" and `temporal workflow signal` do); a refused one is logged and dropped. */
export const reviewSignal = defineSignal<[ReviewInput]>('review');

/**
 * What a reviewer (the desk, the admin route) needs to judge: the status, the revision and draft
 * key awaiting a verdict (null when none is awaited; the text is read from the operation store by
 * `draftKey`), why a person must look (`approval required`, `held: <rule>`, `handoff: <reason>`),
 * and the verdict once one stands. Ids and rule names only, never text.
 */
export interface ReviewState {
  status: ReplyStatus;
  revision: number | null;
  draftKey: string | null;
  reason: string | null;
  verdict: ReviewVerdict | null;
}

export const reviewStateQuery = defineQuery<ReviewState>('reviewState');

/**
 * What an effect activity reports about its own operation, from the operation store's answer:
 * `executed` by this attempt, or `replayed` from the stored result of an earlier one.
 */
export interface OperationReport {
  key: string;
  kind: string;
  state: 'executed' | 'replayed';
}

/**
 * One line of the `operations` query: the activities' own reports, plus the operations the
 * workflow has asked for whose report is not in (`pending`), which failed, or which it will
 * not run (`skipped`: the reply after a rejection).
 */
export interface OperationView {
  key: string;
  kind: string;
  status: OperationReport['state'] | 'pending' | 'failed' | 'skipped';
  summary?: string;
}

export const operationsQuery = defineQuery<OperationView[]>('operations');

export const SearchAttributes = {
  InboxId: defineSearchAttributeKey('InboxId', 'KEYWORD'),
  MessageId: defineSearchAttributeKey('MessageId', 'KEYWORD'),
  ThreadId: defineSearchAttributeKey('ThreadId', 'KEYWORD'),
  ReplyStatus: defineSearchAttributeKey('ReplyStatus', 'KEYWORD'),
  /** Why a message was not answered (ReplyStatus=skipped), e.g. inbox-ceiling-reached: findable in the Web UI. */
  SkipReason: defineSearchAttributeKey('SkipReason', 'KEYWORD'),
  /** The message whose reply answered this one too (ReplyStatus=answered-together): the link in the Web UI. */
  CoveredBy: defineSearchAttributeKey('CoveredBy', 'KEYWORD'),
  /**
   * The customer's language as the draft detected it (ISO 639-1, e.g. `de`), when it could: a filter
   * for people. Not `Language`: SQL visibility's query parser refuses that name (a SQL keyword).
   */
  CustomerLanguage: defineSearchAttributeKey('CustomerLanguage', 'KEYWORD'),
} as const;

/** The custom search attributes' names, all Keyword: what the namespace set-up registers (scripts/services/). */
export const SEARCH_ATTRIBUTE_NAMES = Object.values(SearchAttributes).map((key) => key.name);

/**
 * Conversations (docs/conversations.md): a thread's messages take turns, one holder at a time. A
 * thread's turn is a row in Postgres (`thread_turns`, activities/turns/turn-table.ts): a message asks
 * by a local activity that changes the row under its lock and learns its answer at once when the turn
 * is free; a run that must wait is answered by the `turn` signal when the holder gives the turn back,
 * and asks again on a bounded timer, so a lost signal or a holder that closed without a word never
 * wedges it. Ids, times and hashes only, never text or addresses.
 */
export interface RunRef {
  workflowId: string;
  runId: string;
}

/** `go`: draft and send one reply answering `covers` (oldest first, the receiver last). `covered`: a reply that was sent answers it. */
export type TurnGrant = { kind: 'go'; covers: string[] } | { kind: 'covered'; by: string };
/** What the `turn` signal says: a grant, or `behind` (the run waits behind the thread's holder: it shows so). */
export type TurnAnswer = TurnGrant | { kind: 'behind' };

export const turnSignal = defineSignal<[TurnAnswer]>('turn');

/** What the message's run keeps of its ask, to give the turn back. */
export interface TurnHandBack {
  /** '' when no turn is held (a rerun whose reply the store has). */
  threadKey: string;
  runId: string;
  messageId: string;
  sender: string;
  timestampMs: number;
  sent: boolean;
}

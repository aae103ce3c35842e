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

export type ReplyStatus =
  | 'deciding'
  | 'drafting'
  | 'awaiting_approval'
  | 'escalated'
  | 'sending'
  | 'sent'
  | 'rejected'
  | 'skipped'
  | 'failed'
  /** The agent did not know (issue 23): a ticket note for a person and no email, or a review with the hand-off as its reason. */
  | 'handed_off'
  /** Waiting for the thread's turn (conversations: one message of a thread at a time). */
  | 'waiting_turn'
  /** Covered by a later message's reply: the burst was answered once (CoveredBy names that message). */
  | 'answered-together';

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
  | { status: 'skipped'; reason: string; ticketId: string | null };

/**
 * A person's verdict on a drafted reply, from the Web UI, `temporal workflow update|signal`
 * or the admin route. `text` replaces the drafted text: a changed intent, so it is sent under
 * the next key version (…/reply/v2), never under v1's key. Note that a signal's or update's
 * payload is kept in the workflow's history: an edited text passes through it.
 */
export interface ReviewInput {
  verdict: 'approve' | 'reject';
  text?: string;
  reviewer?: string;
}

/** Sends a review and waits until the workflow accepted it (rejects invalid input with a reason). */
export const reviewUpdate = defineUpdate<{ accepted: true }, [ReviewInput]>('review');
/** The same, fire and forget (what the Web UI's "Send a Signal" and `temporal workflow signal` do). */
export const reviewSignal = defineSignal<[ReviewInput]>('review');

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
} as const;

/** The custom search attributes' names, all Keyword: what the namespace set-up registers (scripts/services/). */
export const SEARCH_ATTRIBUTE_NAMES = Object.values(SearchAttributes).map((key) => key.name);

export const THREAD_WORKFLOW = 'threadWorkflow';

/**
 * A thread's turn keeper (workflows/thread.ts), one per AgentMail thread, its id from inbox_id +
 * thread_id. Message workflows ask it for their turn by signal-with-start; it answers each one,
 * in the order of the messages' timestamps, with a `turn` signal.
 */
export interface ThreadInput {
  inboxId: string;
  threadId: string;
  /** Carried over by continue-as-new. */
  state?: ThreadState;
}

/** A message workflow that asked for its turn. Ids and times only. */
export interface TurnRequest {
  workflowId: string;
  /** The run that asked: a replayed message (a new run) asks again and is answered again. */
  runId: string;
  messageId: string;
  /** The message's timestamp at AgentMail (ms since the epoch): the thread's order. */
  timestampMs: number;
  /** REPLY_COALESCE_MS as the asking worker has it: how long a burst may go on before it is answered. */
  coalesceMs: number;
}

/**
 * The thread's answer: `go` — draft and send one reply answering `covers` (oldest first, the
 * receiver last), then release the turn; `covered` — a later message's reply answers this one.
 */
export type TurnGrant = { kind: 'go'; covers: string[] } | { kind: 'covered'; by: string };

export interface ThreadState {
  waiting: TurnRequest[];
  holder: { workflowId: string; runId: string; messageId: string; covers: string[] } | null;
  /** Runs answered lately (by run id), so a repeated request (a retried signal) is not answered twice. */
  answered: string[];
}

export const turnRequestSignal = defineSignal<[TurnRequest]>('requestTurn');
export const turnSignal = defineSignal<[TurnGrant]>('turn');
/** Sent by the holder when its reply is done (sent, rejected, or failed): the next turn may go. */
export const releaseTurnSignal = defineSignal<[{ runId: string }]>('releaseTurn');
export const threadStateQuery = defineQuery<ThreadState>('threadState');

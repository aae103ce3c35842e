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
  | 'handed_off';

export type InboundMessageResult =
  | {
      status: 'sent';
      replyMessageId: string;
      replyThreadId: string;
      ticketId: string | null;
      replayed: boolean;
      replyVersion: number;
    }
  | { status: 'rejected'; ticketId: string | null }
  /** HANDOFF=ticket: the draft handed the message to a person; the ticket holds the reason, nothing was sent. */
  | { status: 'handed_off'; ticketId: string | null }
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
} as const;

/** The custom search attributes' names, all Keyword: what the namespace set-up registers (scripts/services/). */
export const SEARCH_ATTRIBUTE_NAMES = Object.values(SearchAttributes).map((key) => key.name);

/**
 * The contract between the ingress, operators and the workflow: names, inputs, results,
 * search attributes, queries. Kept free of I/O so workflow code can import it.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery } from '@temporalio/workflow';

export const INBOUND_MESSAGE_WORKFLOW = 'inboundMessageWorkflow';

export interface InboundMessageInput {
  inboxId: string;
  messageId: string;
  /** The webhook event that started it, for the logs; absent on manual starts and replays. */
  eventId?: string;
}

export type ReplyStatus = 'deciding' | 'drafting' | 'sending' | 'sent' | 'skipped' | 'failed';

export type InboundMessageResult =
  | { status: 'sent'; replyMessageId: string; replyThreadId: string; ticketId: string | null; replayed: boolean }
  | { status: 'skipped'; reason: string; ticketId: string | null };

export interface OperationView {
  key: string;
  kind: string;
  status: 'pending' | 'complete' | 'replayed' | 'failed' | 'skipped';
  summary?: string;
}

export const operationsQuery = defineQuery<OperationView[]>('operations');

export const SearchAttributes = {
  InboxId: defineSearchAttributeKey('InboxId', 'KEYWORD'),
  MessageId: defineSearchAttributeKey('MessageId', 'KEYWORD'),
  ThreadId: defineSearchAttributeKey('ThreadId', 'KEYWORD'),
  ReplyStatus: defineSearchAttributeKey('ReplyStatus', 'KEYWORD'),
} as const;

/** Failure types a person can search for in the Web UI; also the non-retryable list. */
export const FailureType = {
  OperationConflict: 'OperationConflict',
  ReplyConflict: 'ReplyConflict',
  ReplyRejected: 'ReplyRejected',
  MessageNotFound: 'MessageNotFound',
  DraftMissing: 'DraftMissing',
  InvalidDraft: 'InvalidDraft',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

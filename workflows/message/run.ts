import { ActivityFailure, ApplicationFailure, log, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import {
  acknowledgmentKey,
  decisionKey,
  draftKey,
  type InboundMessageInput,
  type MessageRef,
  providerDraftKey,
  rejectionNoteKey,
  replyKey,
  type ReplyStatus,
  reviewKey,
  SearchAttributes,
  ticketKey,
  ticketNoteKey,
  ticketReplyKey,
} from '../../contract';
import { operationsBoard } from './board';
import { reviewInbox } from './review';
import { threadTurn } from './turn';

export type DraftVersion = 1 | 2;

/** What every step of one message's run shares: its ids, its keys, its queries, its turn, its budget. */
export type MessageRun = ReturnType<typeof startRun>;

export function startRun(input: InboundMessageInput) {
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const operations = operationsBoard();
  const review = reviewInbox();
  // Every operation key of this message, derived here once and handed to the activity that runs
  // it. Version 2 is an approver's edit: a changed intent, so new draft, AgentMail draft and reply keys.
  const ofVersion = (version: DraftVersion) => ({
    draft: draftKey(ref, version),
    providerDraft: providerDraftKey(ref, version),
    reply: replyKey(ref, version),
  });
  const keys = {
    decision: decisionKey(ref),
    acknowledgment: acknowledgmentKey(ref),
    ticket: ticketKey(ref),
    ticketNote: ticketNoteKey(ref),
    rejectionNote: rejectionNoteKey(ref),
    ticketReply: ticketReplyKey(ref),
    review: reviewKey(ref),
    versions: { 1: ofVersion(1), 2: ofVersion(2) } satisfies Record<DraftVersion, unknown>,
  };
  // ThreadId (and Language) go with the first status set after them (each upsert is a history event).
  let threadPending: SearchAttributeUpdatePair[] = [];
  const setStatus = (status: ReplyStatus, more: SearchAttributeUpdatePair[] = []) => {
    upsertSearchAttributes([{ key: SearchAttributes.ReplyStatus, value: status }, ...threadPending, ...more]);
    threadPending = [];
    operations.status(status);
    review.status(status);
    // The wait for a person, in the log a person follows (the other outcome lines: interceptors/outcomes.ts).
    if (status === 'awaiting_approval' || status === 'held' || status === 'handed_off')
      log.info("awaiting approval: a reviewer's verdict is needed", { status });
  };
  return {
    ref,
    keys,
    operations,
    review,
    turn: threadTurn(),
    setStatus,
    /** The search attributes the run started with (the ingress sets InboxId, MessageId, ThreadId). */
    started: workflowInfo().typedSearchAttributes,
    /** The customer's language as the draft detected it: set with the next status (one upsert fewer). */
    setLanguageWithNextStatus(language: string | null) {
      if (language !== null)
        threadPending = [...threadPending, { key: SearchAttributes.CustomerLanguage, value: language }];
    },
    /** ThreadId, when the decision found another than the run started with: set with the next status. */
    setThreadWithNextStatus(threadId: string) {
      if (workflowInfo().typedSearchAttributes.get(SearchAttributes.ThreadId) !== threadId)
        threadPending = [{ key: SearchAttributes.ThreadId, value: threadId }];
    },
    /**
     * A reply decided on holds a budget reservation until it is sent; one that never reaches the send
     * (rejected, or the run failed before it) gives it back. Once the send has started the
     * reservation stays: the email may have gone out.
     */
    budget: { reserved: false, sendStarted: false },
  };
}

/** Waits for both; then returns both results, or throws the first failure (in argument order). */
export async function bothSettled<A, B>(a: Promise<A>, b: Promise<B>): Promise<[A, B]> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
  return [first.value, second.value];
}

export function failureSummary(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure) return `${cause.type ?? 'Error'}: ${cause.message}`;
  return error instanceof Error ? error.message : String(error);
}

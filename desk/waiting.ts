import type { Client } from '@temporalio/client';
import { INBOUND_MESSAGE_WORKFLOW, type ReplyStatus, reviewStateQuery, SearchAttributes } from '../contract';
import { mayReview, type SignedIn } from './sessions';

/**
 * The queue: every message waiting on a person, from Temporal's visibility (the ReplyStatus
 * search attribute the workflow keeps), never from a copy of our own. Oldest first.
 */

/** The statuses that wait for a person's verdict (handed_off only when HANDOFF=review: a run that ended is not listed). */
export const WAITING_STATUSES = [
  'awaiting_approval',
  'escalated',
  'held',
  'handed_off',
] as const satisfies readonly ReplyStatus[];

/** The most rows one page lists; the rest wait their turn (the count says how many there are). */
export const QUEUE_LIMIT = 200;

export interface WaitingMessage {
  workflowId: string;
  inboxId: string;
  messageId: string;
  status: string;
  startedAt: Date;
  /** Why a person must look (the workflow's reviewState), or null when the query did not answer. */
  reason: string | null;
}

/** A visibility-query string literal. */
export const literal = (value: string): string => `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

export function waitingQuery(inboxes: readonly string[] | null): string {
  const statuses = WAITING_STATUSES.map(literal).join(', ');
  const rights = inboxes === null ? '' : ` AND InboxId IN (${inboxes.map(literal).join(', ') || '""'})`;
  return `WorkflowType = ${literal(INBOUND_MESSAGE_WORKFLOW)} AND ExecutionStatus = "Running" AND ReplyStatus IN (${statuses})${rights}`;
}

export async function waitingMessages(
  temporal: Client,
  reviewer: SignedIn,
): Promise<{ messages: WaitingMessage[]; more: boolean }> {
  const found: WaitingMessage[] = [];
  let more = false;
  // Visibility lists newest first: read up to the limit and more, then sort.
  for await (const info of temporal.workflow.list({ query: waitingQuery(reviewer.inboxes), pageSize: 100 })) {
    if (found.length >= QUEUE_LIMIT * 5) {
      more = true;
      break;
    }
    const inboxId = info.typedSearchAttributes.get(SearchAttributes.InboxId);
    const messageId = info.typedSearchAttributes.get(SearchAttributes.MessageId);
    if (inboxId === undefined || messageId === undefined || !mayReview(reviewer, inboxId)) continue;
    found.push({
      workflowId: info.workflowId,
      inboxId,
      messageId,
      status: info.typedSearchAttributes.get(SearchAttributes.ReplyStatus) ?? 'unknown',
      startedAt: info.startTime,
      reason: null,
    });
  }
  found.sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime());
  if (found.length > QUEUE_LIMIT) more = true;
  const shown = found.slice(0, QUEUE_LIMIT);
  // Each row's reason from the workflow itself; a run that does not answer in time shows its status alone.
  await Promise.all(
    shown.map(async (row) => {
      row.reason = await temporal.workflow
        .getHandle(row.workflowId)
        .query(reviewStateQuery)
        .then(
          (state) => state.reason,
          () => null,
        );
    }),
  );
  return { messages: shown, more };
}

import type { WorkflowHandle } from '@temporalio/client';
import {
  reviewStateQuery,
  reviewUpdate,
  type MessageRef,
  type ReplyStatus,
  type ReviewInput,
  SearchAttributes,
} from '../../contract';
import { inboundWorkflowId } from '../../lib/hashing';
import type { Harness } from './harness';
import { eventually } from './temporal';

/**
 * A reviewer's verdict, sent the way the desk and the admin route send it (the review Update).
 * The one place the history recorder and the rolling-deploy test send verdicts from: when the
 * review input changes (a `revision`, a credential-derived `reviewer`), only this changes.
 */
export async function sendVerdict(
  handle: WorkflowHandle,
  verdict: ReviewInput['verdict'],
  options: { text?: string } = {},
): Promise<void> {
  // The revision awaiting a verdict, as a reviewer's page shows it.
  const { revision } = await handle.query(reviewStateQuery);
  const input: ReviewInput = { verdict, revision: revision ?? 1, reviewer: 'recorded-reviewer' };
  if (options.text !== undefined) input.text = options.text;
  await handle.executeUpdate(reviewUpdate, { args: [input] });
}

/** The message's ReplyStatus search attribute now, or undefined while its run is not there. */
export async function replyStatusOf(h: Harness, ref: MessageRef): Promise<ReplyStatus | undefined> {
  const described = await h.client.workflow
    .getHandle(inboundWorkflowId(ref))
    .describe()
    .catch(() => undefined);
  return described?.typedSearchAttributes.get(SearchAttributes.ReplyStatus) as ReplyStatus | undefined;
}

/** Waits until the message's run shows `status` (its ReplyStatus search attribute), and returns its handle. */
export async function waitForStatus(
  h: Harness,
  ref: MessageRef,
  status: ReplyStatus,
  timeoutMs = 30_000,
): Promise<WorkflowHandle> {
  await eventually(
    async () => ((await replyStatusOf(h, ref)) === status ? true : undefined),
    `${ref.messageId} to be ${status}`,
    timeoutMs,
  );
  return h.client.workflow.getHandle(inboundWorkflowId(ref));
}

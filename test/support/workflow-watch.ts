import { ActivityFailure, ApplicationFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { inboundWorkflowId } from '../../lib/hashing';
import type { MessageRef } from '../../contract';
import { waitForStart, type Harness } from './harness';
import { eventually } from './temporal';

/**
 * Watching a message's workflow from the outside: when it exists, when an activity sits in
 * its retry backoff (no attempt running, so a test may change the world without racing one),
 * which failures its attempts met, and the failure chain it ended with.
 */

const { PENDING_ACTIVITY_STATE_SCHEDULED } = temporal.api.enums.v1.PendingActivityState;

/** The webhook reaches the ingress asynchronously: waits for the intake to start the workflow, then returns the handle. */
export async function inboundWorkflow(h: Harness, ref: MessageRef): Promise<WorkflowHandle> {
  await waitForStart(h, ref);
  return h.client.workflow.getHandle(inboundWorkflowId(ref));
}

export interface Backoff {
  /** The attempt that will run next. */
  nextAttempt: number;
  /** Time left before it runs. */
  windowMs: number;
}

/**
 * Waits until `activityType` has failed at least once and is waiting for its next attempt
 * with at least `minWindowMs` to go: nothing of it runs until then, so a test can edit
 * Postgres or the sandbox in that window without racing an attempt.
 */
export async function retryBackoff(
  handle: WorkflowHandle,
  activityType: string,
  options: { minWindowMs?: number; timeoutMs?: number } = {},
): Promise<Backoff> {
  const minWindowMs = options.minWindowMs ?? 400;
  return eventually(
    async () => {
      const { raw } = await handle.describe();
      const pending = raw.pendingActivities?.find((p) => p.activityType?.name === activityType);
      if (!pending || pending.state !== PENDING_ACTIVITY_STATE_SCHEDULED || (pending.attempt ?? 1) < 2)
        return undefined;
      const windowMs = (optionalTsToMs(pending.nextAttemptScheduleTime) ?? 0) - Date.now();
      return windowMs >= minWindowMs ? { nextAttempt: pending.attempt ?? 2, windowMs } : undefined;
    },
    `${activityType} to wait in its retry backoff with ${minWindowMs} ms to go`,
    options.timeoutMs ?? 20_000,
  );
}

/**
 * Collects the failure type of every failed attempt of `activityType` until the workflow
 * closes: the pending activity's last failure while it retries, and the last failure the
 * final attempt's start event carries in the history (Temporal keeps no event per retry).
 */
export async function activityFailureTypes(handle: WorkflowHandle, activityType: string): Promise<string[]> {
  const seen: string[] = [];
  const note = (failure: temporal.api.failure.v1.IFailure | null | undefined, attempt: number | null | undefined) => {
    const type = failure?.applicationFailureInfo?.type;
    const label = `${attempt ?? '?'}:${type ?? failure?.message ?? 'unknown'}`;
    if (failure && !seen.includes(label)) seen.push(label);
  };
  try {
    for (;;) {
      const { raw, status } = await handle.describe();
      for (const pending of raw.pendingActivities ?? []) {
        if (pending.activityType?.name === activityType) note(pending.lastFailure, (pending.attempt ?? 1) - 1);
      }
      if (status.name !== 'RUNNING') break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch {
    // The connection closed under a test that already failed: report what was seen.
    return seen.map((label) => label.slice(label.indexOf(':') + 1));
  }
  const history = await handle.fetchHistory();
  const scheduled = new Set(
    (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === activityType)
      .map((e) => String(e.eventId)),
  );
  for (const event of history.events ?? []) {
    const started = event.activityTaskStartedEventAttributes;
    if (started && scheduled.has(String(started.scheduledEventId)))
      note(started.lastFailure, (started.attempt ?? 1) - 1);
  }
  return seen.map((label) => label.slice(label.indexOf(':') + 1));
}

/** WorkflowFailedError → ActivityFailure → ApplicationFailure, as the Web UI shows it. */
export function failureChain(error: unknown): {
  activityType: string | undefined;
  type: string | undefined;
  nonRetryable: boolean;
} {
  if (!(error instanceof WorkflowFailedError)) throw new Error(`expected a WorkflowFailedError, got ${String(error)}`);
  const activity = error.cause;
  if (!(activity instanceof ActivityFailure))
    throw new Error(`expected an ActivityFailure as the cause, got ${String(activity)}`);
  const application = activity.cause;
  if (!(application instanceof ApplicationFailure))
    throw new Error(`expected an ApplicationFailure as the activity's cause, got ${String(application)}`);
  return {
    activityType: activity.activityType,
    type: application.type ?? undefined,
    nonRetryable: application.nonRetryable === true,
  };
}

export async function replyStatus(handle: WorkflowHandle): Promise<unknown> {
  return (await handle.describe()).searchAttributes.ReplyStatus;
}

/** `promise`, or a failure naming `what` once `ms` have passed: a broken guarantee fails fast instead of hanging. */
export async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still not settled after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

import { proxyActivities, proxyLocalActivities, type RetryPolicy } from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { FailureType, LOCAL_RETRY_THRESHOLD_MS } from '../../contract';

/** The message workflow's activities, by how they are called (each proxy named for what it is). */

/**
 * Only answers that prove a bug or a permanent refusal stop retrying; everything else backs off
 * and retries with the same operation key. Bounded by RETRY_FOR below (each proxy's schedule-to-close).
 */
const retry: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  nonRetryableErrorTypes: Object.values(FailureType),
};

/**
 * How long one step keeps retrying an answer that may pass (AgentMail or Postgres down, a model
 * rate-limiting us) before the message fails visibly (ReplyStatus=failed). Longer than
 * AgentMail's own ~27.5 h of webhook retries and than the send's reconcile-after (~23 h), so an
 * outage of a day heals by itself; past it a person looks, and a replay of the message (the
 * workflow may be started again once failed) resumes it with the same keys, so nothing repeats.
 */
const RETRY_FOR = '2 days';

/**
 * The effects behind operation keys. They heartbeat while they hold their lease, so a crashed
 * worker is noticed after the heartbeat timeout instead of the whole start-to-close timeout,
 * and the retry takes the effect over once the lease has run out.
 */
export const leasedEffects = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: RETRY_FOR,
  heartbeatTimeout: '10 seconds',
  retry,
});

/** Reads and effects idempotent by nature: quick, no lease. */
export const quickCalls = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: RETRY_FOR,
  retry,
});

/**
 * Short steps that need no task queue of their own: the decision (one AgentMail read and one
 * Postgres query, recorded in the operation store) and the labels (set-like). As local
 * activities they run inside the workflow task that asks for them, which saves the Temporal
 * server a task dispatch and a workflow task per step (docs/performance.md has the figures).
 * Their results are kept in history as markers, so a replay does not run them again; a worker
 * that crashes mid-step loses its workflow task, and the next worker runs the step again — the
 * operation key makes that a replay of the recorded decision (test/crash-windows). Backoffs
 * longer than the threshold become durable timers.
 */
export const localSteps = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: RETRY_FOR,
  localRetryThreshold: LOCAL_RETRY_THRESHOLD_MS,
  retry,
});

/**
 * Giving a budget reservation back on the way out of a failed run. Bounded, so a Postgres outage
 * cannot keep the run from failing; a release that never lands only means fewer replies, not more.
 */
export const boundedCleanup = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  localRetryThreshold: LOCAL_RETRY_THRESHOLD_MS,
  retry: { ...retry, maximumAttempts: 5 },
});

/**
 * Telling reviewers that a reply waits: not awaited, so a webhook that is down never holds up a
 * verdict, and bounded, so it stops trying after an hour (the desk's queue shows the reply anyway).
 */
export const reviewerNotifier = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '1 hour',
  heartbeatTimeout: '10 seconds',
  retry,
});

/**
 * The word back to the customer when a person must answer (HANDOFF_ACKNOWLEDGMENT): an email like
 * the reply (its own key, AgentMail's Idempotency-Key), so leased; bounded to an hour, because a
 * word that cannot go out within it is no longer the prompt answer it was meant to be.
 */
export const acknowledgments = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: '1 hour',
  heartbeatTimeout: '10 seconds',
  retry,
});

import { ApplicationFailure, Context } from '@temporalio/activity';
import { failpoint, type Failpoint } from '../../lib/failpoints';
import { requestHash } from '../../lib/hashing';
import type { OperationKind } from '../../lib/keys';
import * as metrics from '../../lib/metrics';
import { FailureType } from '../../workflows/shared';
import { LeaseLostError, OperationConflictError, OperationFailedError, OperationInProgressError } from './errors';
import type { OperationStore } from './store';

/**
 * Runs one business effect at most once per operation key, from inside an activity:
 * claim → effect → store the result, with the lease renewed (and Temporal heartbeated) while
 * the effect runs. Every effectful activity goes through here; none hand-rolls its own dedupe.
 */

export interface OperationSpec {
  key: string;
  /** The effect's kind (the `operations.kind` column): the workflow's, or a new effect's own. */
  kind: OperationKind | (string & {});
  /** The *resolved* request: what the effect will do. A different request under the same key is a conflict. */
  request: unknown;
  leaseMs: number;
}

export interface OwnedAttempt {
  /** An earlier attempt started this effect and its outcome is unknown: resume with the same provider key. */
  resumed: boolean;
  attempts: number;
  /** How long ago the first attempt claimed the key (Postgres's clock). */
  firstAttemptAgeMs: number;
}

export interface OperationOutcome<T> {
  result: T;
  /** True when the result came from the store (the effect happened before), not from this attempt. */
  replayed: boolean;
}

/** Identifies the activity attempt that holds a lease: a slower, older attempt cannot overwrite a newer one. */
export function attemptOwnerToken(): string {
  const info = Context.current().info;
  return `${info.workflowExecution?.runId ?? 'no-run'}/${info.activityId}/${info.attempt}`;
}

export async function runOperation<T>(
  store: OperationStore,
  spec: OperationSpec,
  effect: (attempt: OwnedAttempt) => Promise<T>,
): Promise<OperationOutcome<T>> {
  const ownerToken = attemptOwnerToken();
  const claim = await claimAsTemporalFailure(store, spec, ownerToken);
  if (claim.state === 'complete') {
    metrics.operations.inc({ kind: spec.kind, status: 'replayed' });
    return { result: claim.result as T, replayed: true };
  }

  const stopRenewing = keepLeaseAlive(store, spec, ownerToken);
  let result: T;
  try {
    result = await effect(claim);
  } catch (error) {
    stopRenewing();
    if (error instanceof ApplicationFailure && error.nonRetryable) {
      metrics.operations.inc({ kind: spec.kind, status: 'failed' });
      await store.fail(spec.key, ownerToken, { type: error.type ?? 'Error', message: error.message });
    } else {
      await store.release(spec.key, ownerToken).catch(() => undefined);
    }
    throw error;
  }
  stopRenewing();
  failpoint(`${spec.kind}.after-effect` as Failpoint);
  // A lost lease is retryable: the next attempt replays whatever the newer owner stored.
  await store.complete(spec.key, ownerToken, result);
  failpoint(`${spec.kind}.after-store` as Failpoint);
  metrics.operations.inc({ kind: spec.kind, status: 'executed' });
  return { result, replayed: false };
}

async function claimAsTemporalFailure(store: OperationStore, spec: OperationSpec, ownerToken: string) {
  try {
    return await store.claim({
      key: spec.key,
      kind: spec.kind,
      requestHash: requestHash(spec.request),
      ownerToken,
      leaseMs: spec.leaseMs,
    });
  } catch (error) {
    if (error instanceof OperationConflictError) {
      metrics.operations.inc({ kind: spec.kind, status: 'conflict' });
      throw ApplicationFailure.create({
        type: FailureType.OperationConflict,
        message: error.message,
        nonRetryable: true,
      });
    }
    if (error instanceof OperationFailedError) {
      throw ApplicationFailure.create({
        type: error.failure.type,
        message: `${error.failure.message} (replayed from the operation store)`,
        nonRetryable: true,
      });
    }
    if (error instanceof OperationInProgressError || error instanceof LeaseLostError) {
      metrics.operations.inc({ kind: spec.kind, status: 'in_progress' });
      throw ApplicationFailure.create({ type: error.name, message: error.message, nonRetryable: false });
    }
    throw error;
  }
}

/** Often enough for the workflows' 10 s heartbeat timeout; Temporal throttles what it forwards. */
const HEARTBEAT_EVERY_MS = 2_000;

/**
 * Heartbeats and renews the lease while the effect runs, so Temporal does not start an
 * overlapping attempt while this one is still working, and a crashed attempt's lease runs out.
 */
function keepLeaseAlive(store: OperationStore, spec: OperationSpec, ownerToken: string): () => void {
  const context = Context.current();
  // A local activity has no heartbeat (it lives inside its workflow task); the lease still renews.
  const heartbeat = !context.info.isLocal;
  const timer = setInterval(
    () => {
      if (heartbeat) context.heartbeat();
      store.renew(spec.key, ownerToken, spec.leaseMs).catch(() => undefined);
    },
    Math.min(HEARTBEAT_EVERY_MS, Math.max(250, Math.floor(spec.leaseMs / 3))),
  );
  return () => clearInterval(timer);
}

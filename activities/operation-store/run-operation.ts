import { ApplicationFailure, Context } from '@temporalio/activity';
import { effectFailpoint, failpoint } from '../../lib/failpoints';
import { requestHash } from '../../lib/hashing';
import { FailureType, type OperationKind, type OperationReport } from '../../contract';
import * as metrics from '../../lib/metrics';
import { databaseRejection, rethrowDatabaseRejection } from '../failures/database';
import {
  LeaseLostError,
  OperationConflictError,
  OperationErasedError,
  OperationFailedError,
  OperationInProgressError,
} from './errors';
import type { OperationStore } from './store';

/**
 * Runs one business effect at most once per operation key, from inside an activity:
 * claim → effect → store the result, with the lease renewed (and Temporal heartbeated) while
 * the effect runs. Every effectful activity goes through here; none hand-rolls its own dedupe.
 * Postgres's constraint and data errors (SQLSTATE 22xxx, 23xxx) end it as a final
 * `DatabaseRejected` (database-errors.ts): no retry makes a row fit.
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
  /** The same, as the activity reports it to the workflow (its `operations` query shows these). */
  operation: OperationReport;
}

/**
 * A replay needs nothing but the store: when the operation under `key` is complete, its stored
 * result (as runOperation would replay it), else undefined. An effect calls this FIRST, before it
 * reads anything from a provider to resolve its request: a rerun of an answered message whose
 * AgentMail message is gone since still ends `sent`, `replayed: true`, instead of failing on the
 * read. (The request-hash check is for effects that still have to run; a complete one has.)
 */
export async function replayCompleted<T>(
  store: OperationStore,
  key: string,
  kind: OperationKind | (string & {}),
): Promise<OperationOutcome<T> | undefined> {
  if (typeof key !== 'string' || key === '') return undefined;
  const { row, erased } = await store.lookup(key).catch(rethrowDatabaseRejection);
  if (erased) throw erasedFailure(key);
  if (row === undefined || row.status !== 'complete' || row.kind !== kind) return undefined;
  metrics.operations.inc({ kind, status: 'replayed' });
  return { result: row.result as T, replayed: true, operation: { key, kind, state: 'replayed' } };
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
  if (typeof spec.key !== 'string' || spec.key === '') {
    // Keys come from the workflow. An activity task scheduled by an older workflow version (before a
    // deploy) carries none: say so, rather than let Postgres refuse a null key.
    throw ApplicationFailure.create({
      type: FailureType.OperationKeyMissing,
      message: `the ${spec.kind} activity got no operation key from its workflow; start the message's workflow again (its keys keep its effects single)`,
      nonRetryable: true,
    });
  }
  const ownerToken = attemptOwnerToken();
  const report = (replayed: boolean): OperationOutcome<T>['operation'] => ({
    key: spec.key,
    kind: spec.kind,
    state: replayed ? 'replayed' : 'executed',
  });
  const claim = await claimAsTemporalFailure(store, spec, ownerToken);
  if (claim.state === 'complete') {
    metrics.operations.inc({ kind: spec.kind, status: 'replayed' });
    return { result: claim.result as T, replayed: true, operation: report(true) };
  }

  const stopRenewing = keepLeaseAlive(store, spec, ownerToken);
  let result: T;
  try {
    // The last look before the effect, ordered with any erasure by the row's lock (store.ts).
    await store.beginEffect(spec.key, ownerToken).catch((error: unknown) => {
      if (error instanceof OperationErasedError) throw erasedFailure(spec.key);
      if (error instanceof LeaseLostError)
        throw ApplicationFailure.create({ type: error.name, message: error.message, nonRetryable: false });
      throw error;
    });
    result = await effect(claim);
  } catch (thrown) {
    stopRenewing();
    // A constraint or data error inside the effect is as final as any other refusal: stored, so a replay repeats it.
    const error = databaseRejection(thrown) ?? thrown;
    if (error instanceof ApplicationFailure && error.nonRetryable) {
      metrics.operations.inc({ kind: spec.kind, status: 'failed' });
      await store
        .fail(spec.key, ownerToken, { type: error.type ?? 'Error', message: error.message })
        .catch(rethrowDatabaseRejection);
    } else {
      await store.release(spec.key, ownerToken).catch(() => undefined);
    }
    throw error;
  }
  stopRenewing();
  failpoint(effectFailpoint(spec.kind, 'after-effect'));
  // A lost lease is retryable: the next attempt replays whatever the newer owner stored.
  await store.complete(spec.key, ownerToken, result).catch(async (thrown: unknown) => {
    const rejected = databaseRejection(thrown);
    if (!rejected) throw thrown;
    // The result cannot be stored (e.g. U+0000 in jsonb): record that as the effect's final
    // failure, so no retry or replay runs the effect a second time.
    metrics.operations.inc({ kind: spec.kind, status: 'failed' });
    await store
      .fail(spec.key, ownerToken, { type: rejected.type ?? FailureType.DatabaseRejected, message: rejected.message })
      .catch(() => undefined);
    throw rejected;
  });
  failpoint(effectFailpoint(spec.kind, 'after-store'));
  metrics.operations.inc({ kind: spec.kind, status: 'executed' });
  return { result, replayed: false, operation: report(false) };
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
    if (error instanceof OperationErasedError) throw erasedFailure(spec.key);
    if (error instanceof OperationInProgressError || error instanceof LeaseLostError) {
      metrics.operations.inc({ kind: spec.kind, status: 'in_progress' });
      throw ApplicationFailure.create({ type: error.name, message: error.message, nonRetryable: false });
    }
    // A key or request Postgres refuses (a CHECK, a value too long) will be refused again.
    return rethrowDatabaseRejection(error);
  }
}

/**
 * An erased message's operation, as the workflow sees it: final, and the same whatever replays it
 * (a late webhook, a catch-up, a watchdog, a rerun). The workflow ends `erased` on it.
 */
export function erasedFailure(key: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.Erased,
    message: `operation ${key} belongs to an erased message: nothing of it runs again`,
    nonRetryable: true,
  });
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

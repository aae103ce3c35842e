import type { Db } from '../../lib/db';
import {
  OperationConflictError,
  OperationFailedError,
  OperationInProgressError,
  OperationErasedError,
  LeaseLostError,
  type StoredFailure,
} from './errors';

/**
 * The operation store: one row per business effect, claimed atomically, its result kept so
 * that every retry, restart or replay returns the first outcome instead of repeating it.
 * The claim protocol is DESIGN.md's; times come from Postgres (`now()`) so workers with
 * skewed clocks agree on when a lease has expired.
 */

export const OperationStatus = { processing: 'processing', complete: 'complete', failed: 'failed' } as const;
export type OperationStatus = (typeof OperationStatus)[keyof typeof OperationStatus];

export interface OperationRow {
  operation_key: string;
  kind: string;
  request_hash: string;
  status: OperationStatus;
  result: unknown;
  error: StoredFailure | null;
  owner_token: string | null;
  lease_until: Date | null;
  attempts: number;
  first_attempt_at: Date;
  created_at: Date;
  updated_at: Date;
  /** Set on a tombstone: the message was erased (privacy/erase.ts); the result holds no content. */
  erased_at: Date | null;
  effect_started_at: Date | null;
}

/**
 * The prefixes an erased message could have given this key: every leading part of it that ends at
 * a `/` (`<inbox>/`, `<inbox>/<message>/`, …). An erased message's prefix is one of them when the
 * key is one of its operations; looked up by equality, so the check is an index probe however many
 * messages were erased.
 */
export function keyPrefixes(key: string): string[] {
  const prefixes: string[] = [];
  for (let i = key.indexOf('/'); i >= 0; i = key.indexOf('/', i + 1)) prefixes.push(key.slice(0, i + 1));
  return prefixes;
}

const UNDER_ERASED_PREFIX = 'EXISTS (SELECT 1 FROM erased_messages WHERE key_prefix = ANY($PREFIXES::text[]))';
const underErasedPrefix = (parameter: number) => UNDER_ERASED_PREFIX.replace('$PREFIXES', `$${parameter}`);

type OwnedRow = { attempts: number; age_ms: number };

export interface ClaimRequest {
  key: string;
  kind: string;
  requestHash: string;
  /** Identifies this attempt; completing or failing the row requires it. */
  ownerToken: string;
  leaseMs: number;
}

export type Claim =
  /**
   * This attempt owns the effect. `resumed`: an earlier attempt started it and its outcome is
   * unknown. `firstAttemptAgeMs` is measured by Postgres's clock, like the leases.
   */
  | { state: 'owned'; resumed: boolean; attempts: number; firstAttemptAgeMs: number }
  /** The effect already happened: replay its result. */
  | { state: 'complete'; result: unknown };

export class OperationStore {
  constructor(private readonly db: Db) {}

  async claim(request: ClaimRequest): Promise<Claim> {
    const { key, kind, requestHash, ownerToken, leaseMs } = request;
    // 1. The first attempt anywhere inserts the row and owns the effect.
    //    Not under an erased message's prefix: a late webhook or a rerun of an erased message
    //    finds no row to claim (the same statement, so an erasure committed before it is seen).
    const inserted = await this.db.query<OwnedRow>(
      `INSERT INTO operations (operation_key, kind, request_hash, status, owner_token, lease_until)
       SELECT $1, $2, $3, 'processing', $4, now() + $5 * interval '1 millisecond'
        WHERE NOT ${underErasedPrefix(6)}
       ON CONFLICT (operation_key) DO NOTHING
       RETURNING attempts, 0::float8 AS age_ms`,
      [key, kind, requestHash, ownerToken, leaseMs, keyPrefixes(key)],
    );
    const fresh = inserted.rows[0];
    if (fresh) return { state: 'owned', resumed: false, attempts: fresh.attempts, firstAttemptAgeMs: 0 };

    // 5. A row still processing whose lease has expired (or is ours already) is taken over in
    //    one conditional update, so two attempts racing for it cannot both win.
    const taken = await this.db.query<OwnedRow>(
      `UPDATE operations
          SET owner_token = $3, lease_until = now() + $4 * interval '1 millisecond',
              attempts = attempts + 1, updated_at = now()
        WHERE operation_key = $1 AND request_hash = $2 AND status = 'processing' AND erased_at IS NULL
          AND (lease_until IS NULL OR lease_until <= now() OR owner_token = $3)
        RETURNING attempts, (extract(epoch FROM now() - first_attempt_at) * 1000)::float8 AS age_ms`,
      [key, requestHash, ownerToken, leaseMs],
    );
    const resumed = taken.rows[0];
    if (resumed)
      return { state: 'owned', resumed: true, attempts: resumed.attempts, firstAttemptAgeMs: resumed.age_ms };

    const { row: existing, erased } = await this.lookup(key);
    // 0. Erased: before anything else (a tombstone's request hash is not worth comparing).
    if (erased) throw new OperationErasedError(key);
    if (!existing) {
      // Only a deletion (retention pruning) between our statements gets here; the retry starts over.
      throw new OperationInProgressError(key, null);
    }
    // 2. Same key, different request: a programming error, never a guess.
    if (existing.request_hash !== requestHash) {
      throw new OperationConflictError(
        `operation key ${key} was used before with a different ${existing.kind} request; ` +
          'a changed intent needs a new key version (…/v2)',
        key,
      );
    }
    // 3. Done before: replay.
    if (existing.status === OperationStatus.complete) return { state: 'complete', result: existing.result };
    // 4. Failed terminally before: replay the failure.
    if (existing.status === OperationStatus.failed && existing.error)
      throw new OperationFailedError(key, existing.error);
    // 5. Someone else holds a live lease.
    throw new OperationInProgressError(key, existing.lease_until);
  }

  async complete(key: string, ownerToken: string, result: unknown): Promise<void> {
    const done = await this.db.query(
      `UPDATE operations
          SET status = 'complete', result = $3::jsonb, error = NULL, owner_token = NULL, lease_until = NULL, updated_at = now()
        WHERE operation_key = $1 AND owner_token = $2 AND status = 'processing' AND erased_at IS NULL`,
      [key, ownerToken, JSON.stringify(result)],
    );
    if (done.rowCount !== 1)
      throw new LeaseLostError(`attempt ${ownerToken} lost its lease on ${key} before completing it`, key);
  }

  async fail(key: string, ownerToken: string, failure: StoredFailure): Promise<void> {
    const done = await this.db.query(
      `UPDATE operations
          SET status = 'failed', error = $3::jsonb, owner_token = NULL, lease_until = NULL, updated_at = now()
        WHERE operation_key = $1 AND owner_token = $2 AND status = 'processing' AND erased_at IS NULL`,
      [key, ownerToken, JSON.stringify(failure)],
    );
    if (done.rowCount !== 1)
      throw new LeaseLostError(`attempt ${ownerToken} lost its lease on ${key} before failing it`, key);
  }

  /**
   * Marks the moment this attempt begins its effect, unless the message was erased: one statement
   * on the row an erasure also updates, so the two are ordered by the row's lock. Erased first →
   * `OperationErasedError` and the effect never begins (no email, no ticket after an erasure);
   * begun first → the erasure waits for the effect to finish (privacy/erase.ts) and its receipt
   * says it happened before.
   */
  async beginEffect(key: string, ownerToken: string): Promise<void> {
    const begun = await this.db.query(
      `UPDATE operations SET effect_started_at = now(), updated_at = now()
        WHERE operation_key = $1 AND owner_token = $2 AND status = 'processing' AND erased_at IS NULL
          AND NOT ${underErasedPrefix(3)}`,
      [key, ownerToken, keyPrefixes(key)],
    );
    if (begun.rowCount === 1) return;
    if ((await this.lookup(key)).erased) throw new OperationErasedError(key);
    throw new LeaseLostError(`attempt ${ownerToken} lost its lease on ${key} before its effect began`, key);
  }

  /**
   * Ends this attempt's lease early after a retryable failure, so the next attempt can take
   * over at once (and resume with the same provider key) instead of waiting for expiry.
   */
  async release(key: string, ownerToken: string): Promise<void> {
    await this.db.query(
      `UPDATE operations SET lease_until = now(), updated_at = now()
        WHERE operation_key = $1 AND owner_token = $2 AND status = 'processing'`,
      [key, ownerToken],
    );
  }

  /** Extends a live lease; false when it was lost to another attempt. */
  async renew(key: string, ownerToken: string, leaseMs: number): Promise<boolean> {
    const renewed = await this.db.query(
      `UPDATE operations SET lease_until = now() + $3 * interval '1 millisecond', updated_at = now()
        WHERE operation_key = $1 AND owner_token = $2 AND status = 'processing'`,
      [key, ownerToken, leaseMs],
    );
    return renewed.rowCount === 1;
  }

  /**
   * The stored result of a completed operation of this kind, or undefined while it has none (no
   * row, still processing, failed). A row of another kind under the key is a programming error.
   * T is the result type its effect stored (runOperation<T>); the store cannot check it, so
   * each kind's result type has one owner that reads it (drafts.ts for drafts, review.ts for reviews).
   */
  async completed<T>(key: string, kind: string): Promise<T | undefined> {
    const { row, erased } = await this.lookup(key);
    if (erased) throw new OperationErasedError(key);
    if (row === undefined || row.status !== OperationStatus.complete) return undefined;
    if (row.kind !== kind)
      throw new OperationConflictError(`operation key ${key} holds a ${row.kind} operation, not a ${kind}`, key);
    return row.result as T;
  }

  /**
   * Opens a completed operation of this kind again, for an effect whose result a new run must
   * work out anew (a decision whose reply has not gone out, activities/decide/decide-reply.ts):
   * processing with an expired lease, so the next claim takes it over under the same key and
   * request. Returns whether it was complete (and is now open).
   */
  async reopen(key: string, kind: string): Promise<boolean> {
    const reopened = await this.db.query(
      `UPDATE operations
          SET status = 'processing', result = NULL, owner_token = NULL, lease_until = now(), updated_at = now()
        WHERE operation_key = $1 AND kind = $2 AND status = 'complete' AND erased_at IS NULL`,
      [key, kind],
    );
    return reopened.rowCount === 1;
  }

  /** Whether any of these operations may have had its effect: complete, or processing (outcome unknown). */
  async mayHaveHappened(keys: string[]): Promise<boolean> {
    const found = await this.db.query(
      `SELECT 1 FROM operations WHERE operation_key = ANY($1::text[]) AND status <> 'failed' LIMIT 1`,
      [keys],
    );
    return (found.rowCount ?? 0) > 0;
  }

  async get(key: string): Promise<OperationRow | undefined> {
    const found = await this.db.query<OperationRow>('SELECT * FROM operations WHERE operation_key = $1', [key]);
    return found.rows[0];
  }

  /** The row under `key` (if any), and whether it is erased: a tombstone, or under an erased message's prefix. */
  async lookup(key: string): Promise<{ row: OperationRow | undefined; erased: boolean }> {
    const found = await this.db.query<OperationRow & { under_erased_prefix: boolean }>(
      `SELECT o.*, ${underErasedPrefix(2)} AS under_erased_prefix
         FROM (SELECT $1::text AS wanted) w LEFT JOIN operations o ON o.operation_key = w.wanted`,
      [key, keyPrefixes(key)],
    );
    // A LEFT JOIN: the row's columns are NULL when there is none.
    const { under_erased_prefix, ...row } = found.rows[0]!;
    const present: OperationRow | undefined = row.operation_key === null ? undefined : row;
    return { row: present, erased: under_erased_prefix || (present?.erased_at ?? null) !== null };
  }
}

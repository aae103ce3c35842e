import { createHash, randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../../lib/db';
import {
  RehearsalFailureType,
  rehearsalKey,
  type RehearsalOutcomeKind,
  type RehearsedMessage,
} from '../../contract/rehearsal';
import type { RehearsalResult } from './result';
import type { ListedMessage } from './reads';

/**
 * The rehearsal's own tables (db/migrations/1796250000000_rehearsals.sql): the rehearsal, the
 * messages it chose, and one result per message, claimed and completed as the operation store
 * claims an effect (activities/operation-store/store.ts) — a lease with an owner token, a stored
 * result replayed — so a message is drafted once per rehearsal however often a worker dies.
 */

export interface Rehearsal {
  rehearsalId: string;
  inboxId: string;
  from: Date;
  to: Date;
  limit: number;
  sampled: boolean;
  configuration: Record<string, unknown>;
  configurationHash: string;
  listedAt: Date | null;
  listedTotal: number | null;
  truncated: boolean;
  finishedAt: Date | null;
  createdAt: Date;
  expiresAt: Date;
}

const REHEARSAL_COLUMNS = `rehearsal_id AS "rehearsalId", inbox_id AS "inboxId", period_from AS "from", period_to AS "to",
  message_limit AS "limit", sampled, configuration, configuration_hash AS "configurationHash", listed_at AS "listedAt",
  listed_total AS "listedTotal", truncated, finished_at AS "finishedAt", created_at AS "createdAt", expires_at AS "expiresAt"`;

export const configurationHash = (configuration: unknown): string =>
  createHash('sha256').update(JSON.stringify(configuration)).digest('hex');

export type NewRehearsal = Pick<
  Rehearsal,
  'rehearsalId' | 'inboxId' | 'from' | 'to' | 'limit' | 'sampled' | 'configuration'
> & {
  retentionMs: number;
};

/**
 * Creates the rehearsal, or finds it: the same id with the same inbox, period, limit and
 * configuration is the same rehearsal (a second start attaches); anything else under that id is a
 * mistake said in words, never a second rehearsal mixed into the first.
 */
export async function createRehearsal(
  db: Db,
  input: NewRehearsal,
): Promise<{ rehearsal: Rehearsal; created: boolean }> {
  const hash = configurationHash(input.configuration);
  const inserted = await db.query<Rehearsal>(
    `INSERT INTO rehearsals (rehearsal_id, inbox_id, period_from, period_to, message_limit, sampled, configuration,
                             configuration_hash, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + $9 * interval '1 millisecond')
     ON CONFLICT (rehearsal_id) DO NOTHING RETURNING ${REHEARSAL_COLUMNS}`,
    [
      input.rehearsalId,
      input.inboxId,
      input.from,
      input.to,
      input.limit,
      input.sampled,
      input.configuration,
      hash,
      input.retentionMs,
    ],
  );
  if (inserted.rows[0]) return { rehearsal: inserted.rows[0], created: true };
  const existing = await findRehearsal(db, input.rehearsalId);
  if (existing === null) return createRehearsal(db, input); // deleted in between
  const differs = [
    existing.inboxId !== input.inboxId && 'inbox',
    (existing.from.getTime() !== input.from.getTime() || existing.to.getTime() !== input.to.getTime()) && 'period',
    (existing.limit !== input.limit || existing.sampled !== input.sampled) && 'limit or sample',
    existing.configurationHash !== hash && 'configuration (drafter, knowledge or rules)',
  ].filter((x): x is string => typeof x === 'string');
  if (differs.length > 0)
    throw new RehearsalMismatch(
      `rehearsal ${input.rehearsalId} already exists with a different ${differs.join(', ')}: resume it with the same settings, or give this one another --id`,
      existing,
      differs,
    );
  return { rehearsal: existing, created: false };
}

export class RehearsalMismatch extends Error {
  override name = 'RehearsalMismatch';
  constructor(
    message: string,
    readonly existing: Rehearsal,
    readonly differs: string[],
  ) {
    super(message);
  }
}

export async function findRehearsal(db: Db, rehearsalId: string): Promise<Rehearsal | null> {
  const { rows } = await db.query<Rehearsal>(
    `SELECT ${REHEARSAL_COLUMNS} FROM rehearsals WHERE rehearsal_id = $1 AND expires_at > now()`,
    [rehearsalId],
  );
  return rows[0] ?? null;
}

export async function requireRehearsal(db: Db, rehearsalId: string): Promise<Rehearsal> {
  const found = await findRehearsal(db, rehearsalId);
  if (found === null)
    throw ApplicationFailure.create({
      type: RehearsalFailureType.Unknown,
      message: `no rehearsal ${rehearsalId} (deleted, expired, or never created)`,
      nonRetryable: true,
    });
  return found;
}

/** The rehearsals of these inboxes (null: every inbox), newest first. */
export async function listRehearsals(db: Db, inboxes: readonly string[] | null): Promise<Rehearsal[]> {
  const { rows } = await db.query<Rehearsal>(
    `SELECT ${REHEARSAL_COLUMNS} FROM rehearsals
      WHERE expires_at > now() AND ($1::text[] IS NULL OR lower(inbox_id) = ANY($1::text[]))
      ORDER BY created_at DESC LIMIT 200`,
    [inboxes],
  );
  return rows;
}

/** Stores the chosen messages once: a listing repeated after a crash finds them stored and lists nothing. */
export async function storeListing(
  db: Db,
  rehearsalId: string,
  listing: { chosen: ListedMessage[]; seen: number; truncated: boolean },
): Promise<number> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const claimed = await client.query(
      `UPDATE rehearsals SET listed_at = now(), listed_total = $2, truncated = $3
        WHERE rehearsal_id = $1 AND listed_at IS NULL`,
      [rehearsalId, listing.seen, listing.truncated],
    );
    if (claimed.rowCount === 1 && listing.chosen.length > 0) {
      await client.query(
        `INSERT INTO rehearsal_messages (rehearsal_id, position, message_id, thread_id, received_at)
         SELECT $1, ord - 1, m, t, r FROM unnest($2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS x(m, t, r, ord)`,
        [
          rehearsalId,
          listing.chosen.map((m) => m.messageId),
          listing.chosen.map((m) => m.threadId),
          listing.chosen.map((m) => m.receivedAt),
        ],
      );
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
  return messageCount(db, rehearsalId);
}

export async function messageCount(db: Db, rehearsalId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM rehearsal_messages WHERE rehearsal_id = $1',
    [rehearsalId],
  );
  return rows[0]?.n ?? 0;
}

export async function messageAt(
  db: Db,
  rehearsalId: string,
  position: number,
): Promise<{ messageId: string; threadId: string }> {
  const { rows } = await db.query<{ messageId: string; threadId: string }>(
    `SELECT message_id AS "messageId", thread_id AS "threadId" FROM rehearsal_messages WHERE rehearsal_id = $1 AND position = $2`,
    [rehearsalId, position],
  );
  if (!rows[0])
    throw ApplicationFailure.create({
      type: RehearsalFailureType.Unknown,
      message: `rehearsal ${rehearsalId} has no message at position ${position}`,
      nonRetryable: true,
    });
  return rows[0];
}

/** A stored result of this message in this rehearsal: replayed as it is. */
export async function storedOutcome(db: Db, rehearsalId: string, messageId: string): Promise<RehearsedMessage | null> {
  const { rows } = await db.query<{ outcome: RehearsalOutcomeKind; reason: string | null }>(
    `SELECT outcome, reason FROM rehearsal_results WHERE rehearsal_id = $1 AND message_id = $2 AND status = 'complete'`,
    [rehearsalId, messageId],
  );
  return rows[0] ? { outcome: rows[0].outcome, reason: rows[0].reason, replayed: true } : null;
}

export type Claim =
  { kind: 'claimed'; ownerToken: string } | { kind: 'complete'; stored: RehearsedMessage } | { kind: 'in-progress' };

/**
 * Claims the message's result before the drafter is called: a new row, or one whose owner's lease
 * ran out (a worker died mid-draft: its call is lost, this one asks again). A live lease is another
 * attempt still drafting.
 */
export async function claimResult(
  db: Db,
  input: { rehearsalId: string; inboxId: string; messageId: string; leaseMs: number },
): Promise<Claim> {
  const ownerToken = randomUUID();
  const key = rehearsalKey(input.rehearsalId, input);
  const inserted = await db.query(
    `INSERT INTO rehearsal_results (rehearsal_id, message_id, operation_key, status, owner_token, lease_until)
     VALUES ($1, $2, $3, 'processing', $4, now() + $5 * interval '1 millisecond')
     ON CONFLICT (rehearsal_id, message_id) DO NOTHING`,
    [input.rehearsalId, input.messageId, key, ownerToken, input.leaseMs],
  );
  if (inserted.rowCount === 1) return { kind: 'claimed', ownerToken };
  const taken = await db.query(
    `UPDATE rehearsal_results SET owner_token = $3, lease_until = now() + $4 * interval '1 millisecond',
            attempts = attempts + 1, updated_at = now()
      WHERE rehearsal_id = $1 AND message_id = $2 AND status = 'processing' AND lease_until <= now()`,
    [input.rehearsalId, input.messageId, ownerToken, input.leaseMs],
  );
  if (taken.rowCount === 1) return { kind: 'claimed', ownerToken };
  const stored = await storedOutcome(db, input.rehearsalId, input.messageId);
  return stored !== null ? { kind: 'complete', stored } : { kind: 'in-progress' };
}

/** Keeps a claim alive while the drafter works; false when another attempt took it over. */
export async function renewClaim(
  db: Db,
  input: { rehearsalId: string; messageId: string; ownerToken: string; leaseMs: number },
): Promise<boolean> {
  const renewed = await db.query(
    `UPDATE rehearsal_results SET lease_until = now() + $4 * interval '1 millisecond'
      WHERE rehearsal_id = $1 AND message_id = $2 AND owner_token = $3 AND status = 'processing'`,
    [input.rehearsalId, input.messageId, input.ownerToken, input.leaseMs],
  );
  return renewed.rowCount === 1;
}

/**
 * Stores the result: with the claim's token (an attempt that lost its lease stores nothing), or,
 * for outcomes that call no drafter (a skip, a covered message, an unreadable one), without a
 * claim, once. Returns whether this call stored it.
 */
export async function completeResult(
  db: Db,
  input: { rehearsalId: string; inboxId: string; messageId: string; ownerToken: string | null },
  outcome: { outcome: RehearsalOutcomeKind; reason: string | null; result: RehearsalResult },
): Promise<boolean> {
  const values = [input.rehearsalId, input.messageId, outcome.outcome, outcome.reason, outcome.result];
  if (input.ownerToken !== null) {
    const done = await db.query(
      `UPDATE rehearsal_results SET status = 'complete', outcome = $3, reason = $4, result = $5, owner_token = NULL,
              lease_until = NULL, updated_at = now()
        WHERE rehearsal_id = $1 AND message_id = $2 AND owner_token = $6 AND status = 'processing'`,
      [...values, input.ownerToken],
    );
    return done.rowCount === 1;
  }
  const done = await db.query(
    `INSERT INTO rehearsal_results (rehearsal_id, message_id, operation_key, status, outcome, reason, result)
     VALUES ($1, $2, $6, 'complete', $3, $4, $5) ON CONFLICT (rehearsal_id, message_id) DO NOTHING`,
    [...values, rehearsalKey(input.rehearsalId, input)],
  );
  return done.rowCount === 1;
}

export async function finishRehearsal(db: Db, rehearsalId: string): Promise<void> {
  await db.query('UPDATE rehearsals SET finished_at = coalesce(finished_at, now()) WHERE rehearsal_id = $1', [
    rehearsalId,
  ]);
}

/** Deletes a rehearsal and everything it holds (its drafts, the team's answers beside them). */
export async function deleteRehearsal(db: Db, rehearsalId: string): Promise<boolean> {
  const deleted = await db.query('DELETE FROM rehearsals WHERE rehearsal_id = $1', [rehearsalId]);
  return deleted.rowCount === 1;
}

/** Deletes the rehearsals past REHEARSAL_RETENTION (their expiry), a batch at a time. */
export async function pruneExpiredRehearsals(db: Db, batchSize = 100): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await db.query(
      `DELETE FROM rehearsals WHERE rehearsal_id IN (
         SELECT rehearsal_id FROM rehearsals WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)`,
      [batchSize],
    );
    total += deleted.rowCount ?? 0;
    if ((deleted.rowCount ?? 0) < batchSize) return total;
  }
}

/**
 * Erasure (privacy/erase.ts): every rehearsal's result for these messages goes, with the customer's
 * words, the draft and the team's answer beside them. The chosen message's id row stays (ids only).
 */
export async function eraseRehearsedMessages(
  db: Db,
  messages: ReadonlyArray<{ inboxId: string; messageId: string }>,
): Promise<number> {
  if (messages.length === 0) return 0;
  const deleted = await db.query(
    `DELETE FROM rehearsal_results r USING rehearsals h
      WHERE r.rehearsal_id = h.rehearsal_id
        AND (h.inbox_id, r.message_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
    [messages.map((m) => m.inboxId), messages.map((m) => m.messageId)],
  );
  return deleted.rowCount ?? 0;
}

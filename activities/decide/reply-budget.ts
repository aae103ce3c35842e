import { inTransaction, type Db } from '../../lib/db';
import { addressHash } from '../../lib/hashing';
import { mailboxOf } from '../agentmail/mailbox';

/**
 * The reply budget, one owner (table `reply_reservations`). Two limits, checked and reserved in
 * one transaction when the decision is made, so a burst cannot walk through them:
 *
 * - per address: at most `perAddress` replies in 24 h that involve one address, as the sender we
 *   answer or as the recipient we write to (loop safety: two agents that strip each other's
 *   auto-reply headers stop here, and so does a sender rotating `Reply-To` through its own domain,
 *   or several senders pointing `Reply-To` at one address);
 * - per inbox: at most `perInboxPerHour` replies in an hour, a circuit breaker for a flood from
 *   many addresses; past it a person answers (a ticket) instead of the agent.
 *
 * Both are exact under concurrency. A reservation takes transaction-scoped advisory locks on the
 * hashes of the addresses involved and on its inbox, all in one global order (class, then key), so
 * two reservations never deadlock; then it counts (each statement of a READ COMMITTED transaction
 * sees what the previous holder committed). So N concurrent decisions for one sender get exactly
 * `perAddress` replies, and N concurrent decisions from N senders to one inbox exactly
 * `perInboxPerHour`. The inbox lock makes one inbox's reservations a queue of short transactions
 * (a few statements each, no I/O but Postgres in between).
 *
 * Addresses are counted as mailboxes (activities/agentmail/mailbox.ts): `rotator+1@x` and
 * `rotator+2@x`, or Gmail's dot variants, share one budget.
 *
 * A reservation is keyed by the message's reply key: a decision retried after a crash finds its
 * own row and is granted again, without a second row. A reply that will not be sent is released
 * (the row stays, marked, and no longer counts); a recorded decision replayed later (an operator
 * re-running a failed message) takes its row back, so what is sent is always counted.
 * Addresses are stored only as hashes.
 */

/** The per-address window. */
export const ADDRESS_WINDOW_HOURS = 24;
/** The window's rows are kept a day longer: margin for clocks and for slow sends. */
export const RESERVATION_RETENTION_HOURS = 48;
/**
 * Two-key advisory locks: classes 1 (an address) and 2 (an inbox) are this module's, so no other
 * lock in the database collides with them.
 */
const ADDRESS_LOCK_CLASS = 1;
const INBOX_LOCK_CLASS = 2;

/** An address's hash for the budget: of its mailbox, so every spelling of one mailbox counts together. */
const mailboxHash = (address: string): string => addressHash(mailboxOf(address));

export interface BudgetLimits {
  perAddress: number;
  perInboxPerHour: number;
}

export type Reservation =
  { granted: true; replayed: boolean } | { granted: false; reason: 'sender-budget-exceeded' | 'inbox-ceiling-reached' };

export interface ReservationRequest {
  /** The message's reply (its v1 operation key): one reservation per message. */
  replyKey: string;
  inboxId: string;
  /** Who wrote to us (bare address). */
  sender: string;
  /** The one address the reply goes to (activities/agentmail/recipients.ts); usually the sender. */
  recipient: string;
}

export async function reserveReply(db: Db, request: ReservationRequest, limits: BudgetLimits): Promise<Reservation> {
  const senderHash = mailboxHash(request.sender);
  const recipientHash = mailboxHash(request.recipient);
  const involved = [...new Set([senderHash, recipientHash])];
  const locks: Array<{ lockClass: number; key: number }> = [
    ...[...new Set(involved.map(lockKey))].map((key) => ({ lockClass: ADDRESS_LOCK_CLASS, key })),
    { lockClass: INBOX_LOCK_CLASS, key: lockKey(addressHash(request.inboxId.trim().toLowerCase())) },
  ].sort((a, b) => a.lockClass - b.lockClass || a.key - b.key);
  return inTransaction(db, async (client) => {
    for (const { lockClass, key } of locks) {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [lockClass, key]);
    }
    const counted = await client.query<{ ours: boolean; involving: number; inbox: number }>(
      `SELECT EXISTS (SELECT 1 FROM reply_reservations WHERE reply_key = $1) AS ours,
              (SELECT count(*)::int FROM reply_reservations
                WHERE (recipient_hash = ANY($2) OR sender_hash = ANY($2)) AND released_at IS NULL
                  AND reserved_at > now() - $4 * interval '1 hour') AS involving,
              (SELECT count(*)::int FROM reply_reservations
                WHERE inbox_id = $3 AND released_at IS NULL AND reserved_at > now() - interval '1 hour') AS inbox`,
      [request.replyKey, involved, request.inboxId, ADDRESS_WINDOW_HOURS],
    );
    const row = counted.rows[0] ?? { ours: false, involving: 0, inbox: 0 };
    let outcome: Reservation;
    if (row.ours) {
      await client.query('UPDATE reply_reservations SET released_at = NULL WHERE reply_key = $1', [request.replyKey]);
      outcome = { granted: true, replayed: true };
    } else if (row.involving >= limits.perAddress) outcome = { granted: false, reason: 'sender-budget-exceeded' };
    else if (row.inbox >= limits.perInboxPerHour) outcome = { granted: false, reason: 'inbox-ceiling-reached' };
    else {
      await client.query(
        `INSERT INTO reply_reservations (reply_key, inbox_id, recipient_hash, sender_hash) VALUES ($1, $2, $3, $4)`,
        [request.replyKey, request.inboxId, recipientHash, senderHash],
      );
      outcome = { granted: true, replayed: false };
    }
    return outcome;
  });
}

/** An address hash's advisory-lock key: its first 32 bits, as Postgres's signed int4. */
const lockKey = (hash: string): number => parseInt(hash.slice(0, 8), 16) | 0;

/** A reply that will not be sent gives its reservation back. Idempotent. */
export async function releaseReply(db: Db, replyKey: string): Promise<{ released: boolean }> {
  const released = await db.query(
    'UPDATE reply_reservations SET released_at = now() WHERE reply_key = $1 AND released_at IS NULL',
    [replyKey],
  );
  return { released: (released.rowCount ?? 0) > 0 };
}

/**
 * A recorded decision to reply, replayed: its reservation counts again (it may have been released
 * by an earlier run that failed). The recorded decision stands even if the budget filled since.
 */
export async function retakeReply(db: Db, replyKey: string): Promise<void> {
  await db.query('UPDATE reply_reservations SET released_at = NULL WHERE reply_key = $1 AND released_at IS NOT NULL', [
    replyKey,
  ]);
}

/** Replies reserved within the window that involve one address, as sender or recipient. */
export async function reservedFor(db: Db, address: string): Promise<number> {
  const counted = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM reply_reservations
      WHERE (recipient_hash = $1 OR sender_hash = $1) AND released_at IS NULL
        AND reserved_at > now() - $2 * interval '1 hour'`,
    [mailboxHash(address), ADDRESS_WINDOW_HOURS],
  );
  return counted.rows[0]?.n ?? 0;
}

/** Retention: deletes up to `batchSize` of the oldest reservations past the retention period. */
export async function pruneReservations(db: Db, batchSize: number): Promise<number> {
  const deleted = await db.query(
    `DELETE FROM reply_reservations WHERE reply_key IN (
        SELECT reply_key FROM reply_reservations
         WHERE reserved_at < now() - $1 * interval '1 hour' ORDER BY reserved_at LIMIT $2)`,
    [RESERVATION_RETENTION_HOURS, batchSize],
  );
  return deleted.rowCount ?? 0;
}

import { inTransaction, type Db } from '../../lib/db';
import * as metrics from '../../lib/metrics';

/**
 * Tickets for skipped mail cannot flood the help desk (issue 18 point 4). A message skipped with
 * TICKET_FOR_SKIPPED on (a sender past its budget, a robot when TICKET_FOR_ROBOTS is on…) opens a
 * ticket only while its inbox has fewer than `perWindow` such tickets opened in the last `windowMs`
 * (default: one per inbox per 24 h); past that it is counted on the inbox's newest one instead.
 * One owner (table `skipped_ticket_folds`), keyed by the message's ticket key, so a retried
 * attempt finds its own row and gets the same answer. Answered messages, and the skips a person
 * must answer (too-old, inbox-ceiling-reached), never come here: each has its own ticket.
 *
 * The fold is keyed by the receiving inbox alone; a later rule (one ticket per thread) composes
 * with it by asking before it opens a thread's first ticket.
 */

export interface FoldLimits {
  /** Tickets for skipped mail one inbox may open per window (TICKET_FOR_SKIPPED_PER_INBOX). */
  perWindow: number;
  /** The window, ms (TICKET_FOR_SKIPPED_WINDOW). */
  windowMs: number;
}

export type FoldOutcome =
  | { folded: false }
  /** Counted on the open ticket of `into` (its ticket operation key); `count` is that ticket's count so far. */
  | { folded: true; into: string; count: number };

/** Advisory-lock class of the fold (reply-budget.ts uses 1): one inbox's skipped tickets in turn. */
const LOCK_CLASS = 2;

export async function foldSkippedTicket(
  db: Db,
  message: { ticketKey: string; inboxId: string; reason: string },
  limits: FoldLimits,
): Promise<FoldOutcome> {
  const { outcome, wrote } = await inTransaction(db, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext('skipped-tickets:' || $2))", [
      LOCK_CLASS,
      message.inboxId,
    ]);
    const mine = await client.query<{ opened: boolean; folded_into: string | null }>(
      'SELECT opened, folded_into FROM skipped_ticket_folds WHERE ticket_key = $1',
      [message.ticketKey],
    );
    let outcome: FoldOutcome;
    const earlier = mine.rows[0];
    if (earlier) {
      outcome = earlier.opened
        ? { folded: false }
        : { folded: true, into: earlier.folded_into!, count: await countOn(client, earlier.folded_into!) };
    } else {
      // Postgres's clock, as for leases and the budget: every worker agrees on the window.
      const open = await client.query<{ ticket_key: string }>(
        `SELECT ticket_key FROM skipped_ticket_folds
          WHERE inbox_id = $1 AND opened AND at > now() - $2 * interval '1 millisecond'
          ORDER BY at DESC`,
        [message.inboxId, limits.windowMs],
      );
      const newest = open.rows[0]?.ticket_key;
      if (newest === undefined || open.rows.length < limits.perWindow) {
        await client.query(
          'INSERT INTO skipped_ticket_folds (ticket_key, inbox_id, reason, opened) VALUES ($1, $2, $3, true)',
          [message.ticketKey, message.inboxId, message.reason],
        );
        outcome = { folded: false };
      } else {
        await client.query(
          `INSERT INTO skipped_ticket_folds (ticket_key, inbox_id, reason, opened, folded_into)
           VALUES ($1, $2, $3, false, $4)`,
          [message.ticketKey, message.inboxId, message.reason, newest],
        );
        outcome = { folded: true, into: newest, count: await countOn(client, newest) };
      }
    }
    return { outcome, wrote: earlier === undefined };
  });
  // Counted once per message, when its row is written (not when a retry finds it), and committed.
  if (wrote && outcome.folded) metrics.skippedTicketsFolded.inc({ reason: message.reason });
  return outcome;
}

async function countOn(client: { query: Db['query'] }, into: string): Promise<number> {
  const counted = await client.query<{ count: number }>(
    'SELECT count(*)::int AS count FROM skipped_ticket_folds WHERE folded_into = $1',
    [into],
  );
  return counted.rows[0]?.count ?? 0;
}

import { Context, log } from '@temporalio/activity';
import type { Db } from '../../lib/db';
import { pruneReservations } from '../decide/reply-budget';
import type { ActivityConfig } from '../../lib/config';

/**
 * Retention: rows that have done their job are deleted in bounded batches (short statements, short
 * locks, and a heartbeat between them), oldest first. Tickets are business records and stay (until
 * their customer is erased). Erasure's tombstones and receipts stay (docs/privacy.md has the table).
 * An inbox cursor older than the operation horizon is pruned too: a resume from it would be moved
 * up to the horizon anyway, and an inbox nobody writes to any more should not be listed by --all.
 */

/** AgentMail retries a delivery for ~27.5 h; a week keeps every event_id a retry could carry. */
export const INBOUND_EVENT_RETENTION_DAYS = 7;
/** Rows per DELETE: small enough that each statement is brief, big enough to drain a day quickly. */
export const PRUNE_BATCH_SIZE = 1_000;

export interface RetentionDeps {
  db: Db;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_RETENTION_DAYS'>;
}

export interface PruneResult {
  inboundEvents: number;
  /** Intake rows whose workflow was started that long ago (the record of the hand-over). */
  intake: number;
  operations: number;
  /** The reply budget's reservations (activities/decide/reply-budget.ts owns their retention period). */
  replyReservations: number;
  /** Cursors of inboxes with no message for OPERATION_RETENTION_DAYS (a resume could not reach back further). */
  inboxCursors: number;
  /** Threads' turn rows nobody held or waited in for OPERATION_RETENTION_DAYS (a new ask makes the row again). */
  threadTurns: number;
}

/** Each: the table, its key, the age test (`$1` is the cut-off), and what is kept whatever its age. */
const TARGETS = {
  inboundEvents: { table: 'inbound_events', key: 'event_id', age: 'received_at', keep: '' },
  // Only started rows: `started_at < cut-off` is never true of an unstarted one (NULL), which stays
  // until the relay has started it, however old.
  intake: { table: 'intake', key: 'workflow_id', age: 'started_at', keep: '' },
  // An erased message's operations are tombstones (key, kind, status; no content: privacy/erase.ts):
  // kept, like erased_messages, for as long as a replay could bring the message back.
  operations: { table: 'operations', key: 'operation_key', age: 'updated_at', keep: ' AND erased_at IS NULL' },
  inboxCursors: { table: 'inbox_cursors', key: 'inbox_id', age: 'newest_message_at', keep: '' },
  // A row with a holder or someone waiting is a turn in progress (a reply awaiting approval for weeks).
  threadTurns: {
    table: 'thread_turns',
    key: 'thread_key',
    age: 'updated_at',
    keep: ` AND state->'holder' = 'null'::jsonb AND state->'waiting' = '[]'::jsonb`,
  },
} as const;

export async function pruneExpiredRecords(
  deps: RetentionDeps,
  input: { batchSize?: number } = {},
): Promise<PruneResult> {
  const batchSize = input.batchSize ?? PRUNE_BATCH_SIZE;
  const hour = 60 * 60 * 1000;
  const cutoffs: Record<keyof typeof TARGETS, number> = {
    inboundEvents: INBOUND_EVENT_RETENTION_DAYS * 24 * hour,
    // The events' schedule: a retry that finds its event gone finds its row gone with it, and is
    // then a new job whose start finds the workflow (or, past Temporal's retention, the store).
    intake: INBOUND_EVENT_RETENTION_DAYS * 24 * hour,
    operations: deps.config.OPERATION_RETENTION_DAYS * 24 * hour,
    inboxCursors: deps.config.OPERATION_RETENTION_DAYS * 24 * hour,
    // The answers a row keeps are for runs still open: none of them is older than the operations'.
    threadTurns: deps.config.OPERATION_RETENTION_DAYS * 24 * hour,
  };
  const result: PruneResult = {
    inboundEvents: 0,
    intake: 0,
    operations: 0,
    inboxCursors: 0,
    threadTurns: 0,
    replyReservations: 0,
  };
  const inBatches = async (name: keyof PruneResult, prune: () => Promise<number>) => {
    for (;;) {
      const deleted = await prune();
      result[name] += deleted;
      Context.current().heartbeat(result);
      if (deleted < batchSize) break;
    }
  };
  for (const name of Object.keys(TARGETS) as Array<keyof typeof TARGETS>) {
    const { table, key, age, keep } = TARGETS[name];
    // Postgres's clock, like the leases: every worker agrees on the cut-off.
    const statement = `DELETE FROM ${table} WHERE ${key} IN (
        SELECT ${key} FROM ${table} WHERE ${age} < now() - $1 * interval '1 millisecond'${keep} ORDER BY ${age} LIMIT $2)`;
    await inBatches(name, async () => (await deps.db.query(statement, [cutoffs[name], batchSize])).rowCount ?? 0);
  }
  await inBatches('replyReservations', () => pruneReservations(deps.db, batchSize));
  log.info('retention: pruned expired records', { ...result });
  return result;
}

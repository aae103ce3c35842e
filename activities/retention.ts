import { Context, log } from '@temporalio/activity';
import type { Db } from '../lib/db';
import { pruneReservations } from './reply-budget';

/**
 * Retention: rows that have done their job are deleted in bounded batches (short statements, short
 * locks, and a heartbeat between them), oldest first. Tickets are business records and stay.
 */

/** AgentMail retries a delivery for ~27.5 h; a week keeps every event_id a retry could carry. */
export const INBOUND_EVENT_RETENTION_DAYS = 7;
/** Rows per DELETE: small enough that each statement is brief, big enough to drain a day quickly. */
export const PRUNE_BATCH_SIZE = 1_000;

export interface RetentionDeps {
  db: Db;
  /** OPERATION_RETENTION_DAYS: operation rows (draft texts, reply results) are kept this long. */
  operationRetentionDays: number;
}

export interface PruneResult {
  inboundEvents: number;
  operations: number;
  /** The reply budget's reservations (activities/reply-budget.ts owns their retention period). */
  replyReservations: number;
}

/** Each: the table, its key, and the age test (`$1` is the cut-off). */
const TARGETS = {
  inboundEvents: { table: 'inbound_events', key: 'event_id', age: 'received_at' },
  operations: { table: 'operations', key: 'operation_key', age: 'updated_at' },
} as const;

export async function pruneExpiredRecords(
  deps: RetentionDeps,
  input: { batchSize?: number } = {},
): Promise<PruneResult> {
  const batchSize = input.batchSize ?? PRUNE_BATCH_SIZE;
  const hour = 60 * 60 * 1000;
  const cutoffs: Record<keyof typeof TARGETS, number> = {
    inboundEvents: INBOUND_EVENT_RETENTION_DAYS * 24 * hour,
    operations: deps.operationRetentionDays * 24 * hour,
  };
  const result: PruneResult = { inboundEvents: 0, operations: 0, replyReservations: 0 };
  const inBatches = async (name: keyof PruneResult, prune: () => Promise<number>) => {
    for (;;) {
      const deleted = await prune();
      result[name] += deleted;
      Context.current().heartbeat(result);
      if (deleted < batchSize) break;
    }
  };
  for (const name of Object.keys(TARGETS) as Array<keyof typeof TARGETS>) {
    const { table, key, age } = TARGETS[name];
    // Postgres's clock, like the leases: every worker agrees on the cut-off.
    const statement = `DELETE FROM ${table} WHERE ${key} IN (
        SELECT ${key} FROM ${table} WHERE ${age} < now() - $1 * interval '1 millisecond' ORDER BY ${age} LIMIT $2)`;
    await inBatches(name, async () => (await deps.db.query(statement, [cutoffs[name], batchSize])).rowCount ?? 0);
  }
  await inBatches('replyReservations', () => pruneReservations(deps.db, batchSize));
  log.info('retention: pruned expired records', { ...result });
  return result;
}

import { Context, log } from '@temporalio/activity';
import type { Db } from '../lib/db';

/**
 * Retention: rows that have done their job are deleted in bounded batches (short statements, short
 * locks, and a heartbeat between them), oldest first. Tickets are business records and stay.
 */

/** AgentMail retries a delivery for ~27.5 h; a week keeps every event_id a retry could carry. */
export const INBOUND_EVENT_RETENTION_DAYS = 7;
/** The per-sender reply budget looks back 24 h; a second day is margin for clocks and slow sends. */
export const SENT_REPLY_RETENTION_HOURS = 48;
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
  sentReplies: number;
}

/** Each: the table, its key, and the age test (`$1` is the cut-off). */
const TARGETS = {
  inboundEvents: { table: 'inbound_events', key: 'event_id', age: 'received_at' },
  operations: { table: 'operations', key: 'operation_key', age: 'updated_at' },
  sentReplies: { table: 'sent_replies', key: 'operation_key', age: 'sent_at' },
} as const;

export async function pruneExpiredRecords(
  deps: RetentionDeps,
  input: { batchSize?: number } = {},
): Promise<PruneResult> {
  const batchSize = input.batchSize ?? PRUNE_BATCH_SIZE;
  const hour = 60 * 60 * 1000;
  const cutoffs: Record<keyof PruneResult, number> = {
    inboundEvents: INBOUND_EVENT_RETENTION_DAYS * 24 * hour,
    operations: deps.operationRetentionDays * 24 * hour,
    sentReplies: SENT_REPLY_RETENTION_HOURS * hour,
  };
  const result: PruneResult = { inboundEvents: 0, operations: 0, sentReplies: 0 };
  for (const name of Object.keys(TARGETS) as Array<keyof PruneResult>) {
    const { table, key, age } = TARGETS[name];
    // Postgres's clock, like the leases: every worker agrees on the cut-off.
    const statement = `DELETE FROM ${table} WHERE ${key} IN (
        SELECT ${key} FROM ${table} WHERE ${age} < now() - $1 * interval '1 millisecond' ORDER BY ${age} LIMIT $2)`;
    for (;;) {
      const deleted = (await deps.db.query(statement, [cutoffs[name], batchSize])).rowCount ?? 0;
      result[name] += deleted;
      Context.current().heartbeat(result);
      if (deleted < batchSize) break;
    }
  }
  log.info('retention: pruned expired records', { ...result });
  return result;
}

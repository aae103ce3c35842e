import { LRUCache } from 'lru-cache';
import type { PoolClient, QueryConfig } from 'pg';
import type { Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import { advanceCursorSql } from './inbox-cursors';

/**
 * The intake table and the webhook-delivery dedupe table, written together. A row in `intake` is
 * the job: once it is committed the message is ours, whatever Temporal is doing. Whether a
 * message is new is decided here, by the primary key (the workflow ID), never by Temporal.
 */

export type DeliveryOutcome = 'queued' | 'duplicate';

/** A message to hand over: what its workflow's start needs, and what orders it. */
export interface Handover {
  inboxId: string;
  messageId: string;
  threadId?: string | undefined;
  /** The message's own time, already clamped (intake/message-time.ts). */
  messageAt?: Date | undefined;
}

/** An accepted, unstarted job as the starter and the relay see it. */
export interface IntakeJob {
  workflowId: string;
  inboxId: string;
  messageId: string;
  threadId?: string | undefined;
  eventId?: string | undefined;
}

export interface IntakeBacklog {
  unstarted: number;
  /** Age of the oldest accepted, unstarted row (0 when there is none). */
  oldestSeconds: number;
}

/**
 * Event ids this process has seen recorded, so a retry storm (a sender replaying its backlog after
 * an outage, Svix retrying a slow answer) is answered from memory instead of one statement each.
 * Only ids known to be in the table are kept, and rows live 7 days (retention) against the
 * cache's hour, so a hit is always a true duplicate; a miss goes to the accept statement, whose
 * conflict on the table's keys stays the authority (other replicas, restarts).
 */
const KNOWN_EVENTS = { max: 50_000, ttl: 60 * 60_000 };

/**
 * ONE statement (so one transaction, one round trip): the intake row, the event row — `queued`
 * when this statement created the job, `duplicate` when it existed — and the inbox's cursor.
 * Concurrent copies of one message serialize on the intake row's key: exactly one creates it.
 */
const ACCEPT_DELIVERY = `
WITH job AS (
  INSERT INTO intake (workflow_id, task_queue, inbox_id, message_id, thread_id, message_at, first_event_id, next_attempt_at)
  VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $7, now() + $8 * interval '1 millisecond')
  ON CONFLICT (workflow_id) DO NOTHING
  RETURNING workflow_id
), event AS (
  INSERT INTO inbound_events (event_id, event_type, inbox_id, message_id, workflow_id, outcome)
  VALUES ($7, 'message.received', $3, $4, $1, CASE WHEN EXISTS (SELECT 1 FROM job) THEN 'queued' ELSE 'duplicate' END)
  ON CONFLICT (event_id) DO NOTHING
), cursor AS (
  ${advanceCursorSql('SELECT $3::text, $6::timestamptz WHERE $6::timestamptz IS NOT NULL')}
)
SELECT EXISTS (SELECT 1 FROM job) AS created`;

/** Catch-up's batch: the page's jobs in one statement, the cursor to the page's newest time with them. */
const ACCEPT_BATCH = `
WITH input AS (
  SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
    AS t(workflow_id, inbox_id, message_id, thread_id, message_at)
), job AS (
  INSERT INTO intake (workflow_id, task_queue, inbox_id, message_id, thread_id, message_at)
  SELECT workflow_id, $1, inbox_id, message_id, thread_id, message_at FROM input
  ON CONFLICT (workflow_id) DO NOTHING
  RETURNING workflow_id
), cursor AS (
  ${advanceCursorSql('SELECT $7::text, $8::timestamptz WHERE $8::timestamptz IS NOT NULL')}
)
SELECT workflow_id FROM job`;

/** The relay's claim: due, unstarted rows of its task queue, locked for its transaction, skipping other relays'. */
const CLAIM_DUE = `
SELECT workflow_id, inbox_id, message_id, thread_id, first_event_id FROM intake
 WHERE task_queue = $1 AND started_at IS NULL AND next_attempt_at <= now()
 ORDER BY next_attempt_at
 LIMIT $2
 FOR UPDATE SKIP LOCKED`;

const MARK_STARTED = `UPDATE intake SET started_at = now(), attempts = attempts + 1, last_start_error = NULL
  WHERE workflow_id = ANY($1::text[]) AND started_at IS NULL`;

/**
 * Temporal answers again: rows that failed while it was away are due now, not at the end of
 * their backoff (up to 30 s). Only rows that failed (attempts > 0): a new row's head start
 * belongs to the starter of the process that accepted it.
 */
const DUE_NOW = `UPDATE intake SET next_attempt_at = now()
  WHERE task_queue = $1 AND started_at IS NULL AND attempts > 0 AND next_attempt_at > now()`;

export class IntakeStore {
  private readonly known = new LRUCache<string, true>(KNOWN_EVENTS);

  constructor(
    private readonly db: Db,
    /** The deployment's TEMPORAL_TASK_QUEUE: its relay starts these rows. */
    readonly taskQueue: string,
  ) {}

  /**
   * Whether this process has seen `eventId` recorded: no database, so a retry storm costs no
   * round trip. A miss proves nothing (another replica, a restart); the statements below decide.
   */
  remembers(eventId: string): boolean {
    return this.known.has(eventId);
  }

  /**
   * Another event type: recorded (so its retries are known) and nothing else, in one statement.
   * Returns whether this call recorded it (false: the event was already in the table).
   */
  async recordIgnored(event: { eventId: string; eventType: string }, timeoutMs?: number): Promise<boolean> {
    const { rowCount } = await this.db.query(
      timed(
        `INSERT INTO inbound_events (event_id, event_type, outcome) VALUES ($1, $2, 'ignored') ON CONFLICT (event_id) DO NOTHING`,
        [event.eventId, event.eventType],
        timeoutMs,
      ),
    );
    this.known.set(event.eventId, true);
    return (rowCount ?? 0) > 0;
  }

  /**
   * A message.received delivery. `headStartMs`: how long the relay leaves a new row to the
   * accepting process's own start (0 when that process will not start it, e.g. its queue is full).
   */
  async acceptDelivery(
    delivery: Handover & { eventId: string },
    options: { headStartMs: number; timeoutMs?: number | undefined },
  ): Promise<{ outcome: DeliveryOutcome; job: IntakeJob }> {
    const workflowId = inboundWorkflowId(delivery);
    const { rows } = await this.db.query<{ created: boolean }>(
      timed(
        ACCEPT_DELIVERY,
        [
          workflowId,
          this.taskQueue,
          delivery.inboxId,
          delivery.messageId,
          delivery.threadId ?? null,
          delivery.messageAt ?? null,
          delivery.eventId,
          options.headStartMs,
        ],
        options.timeoutMs,
      ),
    );
    this.known.set(delivery.eventId, true);
    const { eventId, inboxId, messageId, threadId } = delivery;
    return {
      outcome: rows[0]?.created ? 'queued' : 'duplicate',
      job: { workflowId, inboxId, messageId, threadId, eventId },
    };
  }

  /**
   * Catch-up: hands a page of messages over in one statement and moves the inbox's cursor to
   * `cursorAt` with it. Rows are due at once (the relay starts them). Returns the workflow IDs
   * this call created; the others were handed over before, by any entry.
   */
  async acceptBatch(
    inboxId: string,
    messages: Handover[],
    cursorAt: Date | undefined,
  ): Promise<{ created: Set<string>; workflowIds: string[] }> {
    const workflowIds = messages.map((m) => inboundWorkflowId(m));
    const { rows } = await this.db.query<{ workflow_id: string }>(ACCEPT_BATCH, [
      this.taskQueue,
      workflowIds,
      messages.map((m) => m.inboxId),
      messages.map((m) => m.messageId),
      messages.map((m) => m.threadId ?? null),
      messages.map((m) => m.messageAt ?? null),
      inboxId,
      cursorAt ?? null,
    ]);
    return { created: new Set(rows.map((r) => r.workflow_id)), workflowIds };
  }

  /** Which of these workflow IDs have an intake row (handed over before, by any entry). */
  async handedOver(workflowIds: string[]): Promise<Set<string>> {
    if (workflowIds.length === 0) return new Set();
    const { rows } = await this.db.query<{ workflow_id: string }>(
      'SELECT workflow_id FROM intake WHERE workflow_id = ANY($1::text[])',
      [workflowIds],
    );
    return new Set(rows.map((r) => r.workflow_id));
  }

  async backlog(timeoutMs?: number): Promise<IntakeBacklog> {
    const { rows } = await this.db.query<{ unstarted: string; oldest: number | null }>(
      timed(
        `SELECT count(*) AS unstarted, EXTRACT(EPOCH FROM now() - min(accepted_at))::float8 AS oldest
           FROM intake WHERE task_queue = $1 AND started_at IS NULL`,
        [this.taskQueue],
        timeoutMs,
      ),
    );
    return { unstarted: Number(rows[0]?.unstarted ?? 0), oldestSeconds: Math.max(0, rows[0]?.oldest ?? 0) };
  }

  /** Due for the relay at once (its head start was for a starter that cannot take it). */
  async dueNow(workflowId: string): Promise<void> {
    await this.db.query('UPDATE intake SET next_attempt_at = now() WHERE workflow_id = $1 AND started_at IS NULL', [
      workflowId,
    ]);
  }

  /**
   * The relay's pass: claims up to `limit` due rows inside the caller's transaction (`client`),
   * so they stay locked until it commits its marks.
   */
  async claimDue(client: PoolClient, limit: number): Promise<IntakeJob[]> {
    const { rows } = await client.query<{
      workflow_id: string;
      inbox_id: string;
      message_id: string;
      thread_id: string | null;
      first_event_id: string | null;
    }>(CLAIM_DUE, [this.taskQueue, limit]);
    return rows.map((row) => ({
      workflowId: row.workflow_id,
      inboxId: row.inbox_id,
      messageId: row.message_id,
      threadId: row.thread_id ?? undefined,
      eventId: row.first_event_id ?? undefined,
    }));
  }

  /**
   * The workflows of these rows exist now (started, or found running or closed): the jobs are
   * done. `client`: the relay's transaction; without it, the pool.
   */
  async markStarted(workflowIds: string[], client?: PoolClient): Promise<void> {
    if (workflowIds.length === 0) return;
    await (client ?? this.db).query(MARK_STARTED, [workflowIds]);
  }

  /** Starts failed: each row is tried again after a backoff that grows with its attempts. */
  async markFailed(failures: Array<{ workflowId: string; error: unknown }>, client?: PoolClient): Promise<void> {
    if (failures.length === 0) return;
    await (client ?? this.db).query(MARK_FAILED, [
      failures.map((f) => f.workflowId),
      failures.map((f) => startErrorText(f.error)),
      START_BACKOFF.baseMs,
      START_BACKOFF.maxMs,
    ]);
  }

  /** Temporal answers again: the rows backed off meanwhile are due now. Returns how many. */
  async bringForward(): Promise<number> {
    const { rowCount } = await this.db.query(DUE_NOW, [this.taskQueue]);
    return rowCount ?? 0;
  }
}

/**
 * A failed start's next try: 1 s, 2 s, 4 s … capped at 30 s, ±20 % jitter so rows that failed
 * together (Temporal went away) do not all come due in the same instant. The cap keeps a message
 * waiting at most about half a minute after Temporal is back.
 */
export const START_BACKOFF = { baseMs: 1_000, maxMs: 30_000 };

/** Per row (arrays of ids and errors): attempts + 1, the error, and the backed-off due time. */
const MARK_FAILED = `
UPDATE intake AS i SET attempts = i.attempts + 1, last_start_error = f.error,
  next_attempt_at = now() + LEAST($4::float8, $3::float8 * power(2, LEAST(i.attempts, 16))) * (0.8 + random() * 0.4) * interval '1 millisecond'
FROM unnest($1::text[], $2::text[]) AS f(workflow_id, error)
WHERE i.workflow_id = f.workflow_id AND i.started_at IS NULL`;

/** What a failed start leaves on its row for a person: the error's name and message, bounded. */
export function startErrorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.slice(0, 500);
}

/** A query with its own client-side timeout (pg honours `query_timeout` per query; its types omit it). */
function timed(text: string, values: unknown[], timeoutMs: number | undefined): QueryConfig {
  return { text, values, ...(timeoutMs ? { query_timeout: timeoutMs } : {}) } as QueryConfig;
}

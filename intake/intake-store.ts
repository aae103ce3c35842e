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

/**
 * Where an unstarted row stands: `waiting` (new, in its head start or due), `backing_off` (a
 * start failed; tried again at its own next time), `dead` (set aside: the relay no longer tries
 * it; `npm run replay -- --stuck`), `other_queue` (a row of another TEMPORAL_TASK_QUEUE than this
 * deployment's: after a rename no relay of ours starts it).
 */
export type BacklogState = 'waiting' | 'backing_off' | 'dead' | 'other_queue';
export const BACKLOG_STATES: readonly BacklogState[] = ['waiting', 'backing_off', 'dead', 'other_queue'];

export interface IntakeBacklog {
  /** This task queue's rows whose workflow has not been started (waiting, backing off or dead). */
  unstarted: number;
  /** Age of the oldest accepted, unstarted row of this task queue (0 when there is none). */
  oldestSeconds: number;
  byState: Record<BacklogState, number>;
}

/** When the relay gives up on a row and sets it aside (lib/config.ts: INTAKE_DEAD_LETTER_*). */
export interface DeadLetterPolicy {
  /** Starts Temporal refused (answered, said no): past this many the row is dead. */
  afterRefusals: number;
  /** Waiting this long since it was accepted (or retried by an operator) the row is dead, whatever failed. */
  afterMs: number;
}

export const DEAD_LETTER_DEFAULTS: DeadLetterPolicy = { afterRefusals: 20, afterMs: 24 * 60 * 60_000 };

/** A row of the dead letter as `npm run replay -- --stuck` lists it: ids, times and an error class only. */
export interface StuckRow {
  workflowId: string;
  inboxId: string;
  messageId: string;
  taskQueue: string;
  acceptedAt: Date;
  deadAt: Date | null;
  attempts: number;
  lastErrorClass: string | null;
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
 * when this statement created the job, `duplicate` when it existed or its message was erased (an
 * erased message is never a job again: privacy/erase.ts) — and the inbox's cursor.
 * Concurrent copies of one message serialize on the intake row's key: exactly one creates it.
 */
const ACCEPT_DELIVERY = `
WITH job AS (
  INSERT INTO intake (workflow_id, task_queue, inbox_id, message_id, thread_id, message_at, first_event_id, next_attempt_at)
  SELECT $1, $2, $3, $4, $5, $6::timestamptz, $7, now() + $8 * interval '1 millisecond'
   WHERE NOT EXISTS (SELECT 1 FROM erased_messages WHERE workflow_id = $1)
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
   WHERE NOT EXISTS (SELECT 1 FROM erased_messages e WHERE e.workflow_id = input.workflow_id)
  ON CONFLICT (workflow_id) DO NOTHING
  RETURNING workflow_id
), cursor AS (
  ${advanceCursorSql('SELECT $7::text, $8::timestamptz WHERE $8::timestamptz IS NOT NULL')}
)
SELECT workflow_id FROM job`;

/** The relay's claim: due, unstarted, live rows of its task queue, locked for its transaction, skipping other relays'. */
const CLAIM_DUE = `
SELECT workflow_id, inbox_id, message_id, thread_id, first_event_id FROM intake
 WHERE task_queue = $1 AND started_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
 ORDER BY next_attempt_at
 LIMIT $2
 FOR UPDATE SKIP LOCKED`;

const MARK_STARTED = `UPDATE intake SET started_at = now(), attempts = attempts + 1, last_start_error = NULL
  WHERE workflow_id = ANY($1::text[]) AND started_at IS NULL`;

/**
 * Temporal is reachable again after being unreachable: a batch of the rows whose last start
 * failed for that reason (their error class a connection-level one) is due now, not at the end
 * of its backoff. Rows Temporal refused keep their own backoff: a rate limit is not lifted by
 * another row's success. A new row's head start belongs to the starter of the process that
 * accepted it (attempts = 0: never touched here).
 */
const BRING_FORWARD = `UPDATE intake SET next_attempt_at = now()
  WHERE workflow_id IN (
    SELECT workflow_id FROM intake
     WHERE task_queue = $1 AND started_at IS NULL AND dead_at IS NULL AND attempts > 0
       AND next_attempt_at > now() AND last_start_error = ANY($2::text[])
     ORDER BY next_attempt_at
     LIMIT $3)`;

export class IntakeStore {
  private readonly known = new LRUCache<string, true>(KNOWN_EVENTS);

  constructor(
    private readonly db: Db,
    /** The deployment's TEMPORAL_TASK_QUEUE: its relay starts these rows. */
    readonly taskQueue: string,
    readonly deadLetter: DeadLetterPolicy = DEAD_LETTER_DEFAULTS,
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
    const { rows } = await this.db.query<{ state: BacklogState; n: string; oldest: number | null }>(
      timed(
        `SELECT CASE WHEN task_queue <> $1 THEN 'other_queue'
                     WHEN dead_at IS NOT NULL THEN 'dead'
                     WHEN attempts > 0 THEN 'backing_off'
                     ELSE 'waiting' END AS state,
                count(*) AS n,
                EXTRACT(EPOCH FROM now() - min(accepted_at) FILTER (WHERE task_queue = $1))::float8 AS oldest
           FROM intake WHERE started_at IS NULL GROUP BY 1`,
        [this.taskQueue],
        timeoutMs,
      ),
    );
    const byState = Object.fromEntries(BACKLOG_STATES.map((state) => [state, 0])) as Record<BacklogState, number>;
    let oldest = 0;
    for (const row of rows) {
      byState[row.state] = Number(row.n);
      if (row.state !== 'other_queue') oldest = Math.max(oldest, row.oldest ?? 0);
    }
    return { unstarted: byState.waiting + byState.backing_off + byState.dead, oldestSeconds: oldest, byState };
  }

  /** The dead letter of this task queue (or of every queue, for rows a rename left behind), oldest first. */
  async stuck(options: { allQueues?: boolean; limit?: number } = {}): Promise<StuckRow[]> {
    const { rows } = await this.db.query<{
      workflow_id: string;
      inbox_id: string;
      message_id: string;
      task_queue: string;
      accepted_at: Date;
      dead_at: Date | null;
      attempts: number;
      last_start_error: string | null;
    }>(
      `SELECT workflow_id, inbox_id, message_id, task_queue, accepted_at, dead_at, attempts, last_start_error
         FROM intake
        WHERE started_at IS NULL AND (dead_at IS NOT NULL OR task_queue <> $1)
          AND ($2::bool OR task_queue = $1)
        ORDER BY accepted_at LIMIT $3`,
      [this.taskQueue, options.allQueues ?? false, options.limit ?? 1_000],
    );
    return rows.map((r) => ({
      workflowId: r.workflow_id,
      inboxId: r.inbox_id,
      messageId: r.message_id,
      taskQueue: r.task_queue,
      acceptedAt: r.accepted_at,
      deadAt: r.dead_at,
      attempts: r.attempts,
      lastErrorClass: r.last_start_error,
    }));
  }

  /**
   * An operator's retry of the dead letter (all of it, or the given workflow ids): the rows are
   * live and due again, their refusals and their day counted afresh. Rows of another task queue
   * are moved to this one (`allQueues`), so this deployment's relay starts them. Returns how many.
   */
  async retryStuck(options: { workflowIds?: string[]; allQueues?: boolean } = {}): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE intake SET dead_at = NULL, refusals = 0, retried_at = now(), next_attempt_at = now(), task_queue = $1
        WHERE started_at IS NULL
          AND (dead_at IS NOT NULL OR ($2::bool AND task_queue <> $1))
          AND ($2::bool OR task_queue = $1)
          AND ($3::text[] IS NULL OR workflow_id = ANY($3::text[]))`,
      [this.taskQueue, options.allQueues ?? false, options.workflowIds ?? null],
    );
    return rowCount ?? 0;
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

  /**
   * Starts failed: each row is tried again after a backoff of its own, which grows with its
   * attempts; a row past the dead-letter policy is set aside instead. Returns the rows that died.
   */
  async markFailed(failures: Array<{ workflowId: string; error: unknown }>, client?: PoolClient): Promise<string[]> {
    if (failures.length === 0) return [];
    const classes = failures.map((f) => startErrorClass(f.error));
    const { rows } = await (client ?? this.db).query<{ workflow_id: string }>(MARK_FAILED, [
      failures.map((f) => f.workflowId),
      classes.map((c) => c.name),
      classes.map((c) => !c.unreachable),
      START_BACKOFF.baseMs,
      START_BACKOFF.maxMs,
      START_BACKOFF.refusedMaxMs,
      this.deadLetter.afterRefusals,
      this.deadLetter.afterMs,
    ]);
    return rows.map((r) => r.workflow_id);
  }

  /** Temporal is reachable again: up to `limit` rows that failed to reach it are due now. Returns how many. */
  async bringForward(limit: number): Promise<number> {
    const { rowCount } = await this.db.query(BRING_FORWARD, [this.taskQueue, [...UNREACHABLE_CLASSES], limit]);
    return rowCount ?? 0;
  }
}

/**
 * A failed start's next try: 1 s, 2 s, 4 s … capped at 30 s while Temporal is unreachable (the
 * connection's recovery brings the rows forward anyway), at 5 min when Temporal refused it (a
 * rate limit, an invalid request: trying sooner only adds load), ±20 % jitter so rows that failed
 * together do not all come due in the same instant.
 */
export const START_BACKOFF = { baseMs: 1_000, maxMs: 30_000, refusedMaxMs: 5 * 60_000 };

/**
 * Per row (arrays of ids, error classes, refused flags): attempts + 1, the class, the refusals,
 * the backed-off due time, and `dead_at` once the refusals or the wait pass the policy.
 */
const MARK_FAILED = `
UPDATE intake AS i SET attempts = i.attempts + 1, last_start_error = f.error_class,
  refusals = i.refusals + f.refused::int,
  next_attempt_at = now() + LEAST(CASE WHEN f.refused THEN $6::float8 ELSE $5::float8 END,
    $4::float8 * power(2, LEAST(i.attempts, 16))) * (0.8 + random() * 0.4) * interval '1 millisecond',
  dead_at = CASE WHEN i.refusals + f.refused::int >= $7::int
                   OR coalesce(i.retried_at, i.accepted_at) <= now() - $8::float8 * interval '1 millisecond'
                 THEN now() END
FROM unnest($1::text[], $2::text[], $3::bool[]) AS f(workflow_id, error_class, refused)
WHERE i.workflow_id = f.workflow_id AND i.started_at IS NULL
RETURNING i.workflow_id, i.dead_at`;

/** gRPC status names by code, for the error class a row keeps. */
const GRPC_STATUS = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

/** Failures that say Temporal could not be reached (no answer), not that it refused. */
export const UNREACHABLE_CLASSES: ReadonlySet<string> = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'CANCELLED']);

/**
 * What a failed start leaves on its row and in the metrics: the gRPC status name, or the error's
 * name — a class, never a message (a message may quote what was sent). `unreachable`: no answer
 * came (connection refused, reset, the deadline): an outage, which a recovery ends for every row.
 */
export function startErrorClass(error: unknown): { name: string; unreachable: boolean } {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (typeof code === 'number' && GRPC_STATUS[code]) {
    const name = GRPC_STATUS[code];
    return { name, unreachable: UNREACHABLE_CLASSES.has(name) };
  }
  const name = error instanceof Error && /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(error.name) ? error.name : 'Error';
  return { name, unreachable: false };
}

/** A query with its own client-side timeout (pg honours `query_timeout` per query; its types omit it). */
function timed(text: string, values: unknown[], timeoutMs: number | undefined): QueryConfig {
  return { text, values, ...(timeoutMs ? { query_timeout: timeoutMs } : {}) } as QueryConfig;
}

import type { Client } from '@temporalio/client';
import { inTransaction, postgresAuthenticationFailure, type Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import * as metrics from '../lib/metrics';
import { IntakeStore, startErrorClass, type IntakeJob } from './intake-store';
import { startInboundWorkflow } from './start-workflow';

/**
 * The intake relay: starts the workflow of every accepted row that has none yet — the accepting
 * process died after its commit, Temporal was away, the in-process queue was full, or a catch-up
 * handed the row over. Each pass claims a batch of due rows of its task queue with
 * `FOR UPDATE SKIP LOCKED` inside one transaction, starts them, and marks each started (or backed
 * off) before committing: any number of relays (one per API replica) share the backlog, and a row
 * is started by at most one of them per pass.
 *
 * It runs inside every API replica rather than as a process of its own: the API is the one
 * process every deployment already runs and scales (the intake's rows are written there), a
 * separate relay would be one more thing to deploy, watch and forget, and SKIP LOCKED makes many
 * relays as safe as one. Idle, a pass is one indexed query on an empty partial index.
 *
 * Backoff is per row (intake-store.ts MARK_FAILED): each row keeps its attempts and its next
 * time. Only evidence that Temporal is reachable again after being unreachable (a start that
 * failed without an answer, then one that succeeded) brings the rows that failed to reach it
 * forward, a batch per pass; a refusal (RESOURCE_EXHAUSTED, a rate limit, an invalid request)
 * is an answer, so nothing is brought forward for it. A row that Temporal keeps refusing, or
 * that waits longer than a day, goes to the dead letter (INTAKE_DEAD_LETTER_*).
 */

export interface RelayOptions {
  /** Sleep between passes when there was nothing (more) to do: a row waits at most about this long. */
  pollMs: number;
  batchSize: number;
  /** Starts in flight at once within a pass. */
  concurrency: number;
  startTimeoutMs: number;
}

/** Polled each second: a stranded message is started within a second or two. */
export const RELAY_DEFAULTS: RelayOptions = { pollMs: 1_000, batchSize: 100, concurrency: 16, startTimeoutMs: 5_000 };

/** The longest wait between passes while they fail (Postgres away). */
const PASS_BACKOFF_MAX_MS = 30_000;

/** A connection-level failure's code (ECONNREFUSED, ENOTFOUND, a pool timeout), or undefined for any other error. */
function connectionErrorCode(error: unknown): string | undefined {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (typeof current === 'object' && current !== null && !seen.has(current)) {
    seen.add(current);
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
    if (typeof message === 'string' && /timeout exceeded when trying to connect|Connection terminated/i.test(message))
      return 'ETIMEDOUT';
    current = (current as { cause?: unknown }).cause ?? (current as AggregateError).errors?.[0];
  }
  return undefined;
}

export class IntakeRelay {
  private stopped = true;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  /** A start found Temporal unreachable since it last answered: the next success starts the recovery. */
  private unreachable = false;
  /** Bringing the rows that failed to reach Temporal forward, a batch per successful pass. */
  private recovering = false;
  /** Passes that failed in a row (Postgres away): the next try waits longer. */
  private passFailures = 0;

  private readonly store: IntakeStore;

  constructor(
    private readonly deps: {
      db: Db;
      temporal: Client;
      taskQueue: string;
      logger: Logger;
      /** The intake's store (its SQL); built from `db` and `taskQueue` when absent. */
      store?: IntakeStore | undefined;
    },
    readonly options: RelayOptions = RELAY_DEFAULTS,
  ) {
    this.store = deps.store ?? new IntakeStore(deps.db, deps.taskQueue);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  /** Run a pass now (e.g. a catch-up just handed rows over) instead of at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  /**
   * A start succeeded somewhere in this process (the starter, or this relay). If a start had
   * found Temporal unreachable, it is reachable again: a batch of the rows that failed to reach
   * it is made due and a pass runs now; each later successful pass brings the next batch, until
   * none is left. Rows Temporal refused keep their own backoff.
   */
  async temporalAnswered(): Promise<void> {
    if (!this.unreachable && !this.recovering) return;
    const first = this.unreachable;
    this.unreachable = false;
    this.recovering = true;
    try {
      const rows = await this.store.bringForward(this.options.batchSize);
      if (rows < this.options.batchSize) this.recovering = false;
      if (first || rows > 0)
        this.deps.logger.info(
          { rows },
          'intake relay: Temporal answers again; rows that could not reach it are due now',
        );
    } catch (error) {
      this.unreachable = true;
      this.deps.logger.warn({ err: error }, 'intake relay: could not bring backed-off rows forward');
    }
    this.wake();
  }

  /** A start failed somewhere in this process: only a failure to reach Temporal starts a recovery later. */
  startFailed(error?: unknown): void {
    if (error === undefined || startErrorClass(error).unreachable) this.unreachable = true;
  }

  /** Stops after the pass in flight (its starts finish and its marks commit). */
  async close(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loop;
  }

  /** One pass: claims, starts and marks up to a batch. Returns the rows it claimed. */
  async pass(): Promise<number> {
    const { db, temporal, taskQueue, logger } = this.deps;
    const { claimed, started, failed, dead } = await inTransaction(db, async (client) => {
      // This transaction holds its claimed rows while it waits on Temporal's starts (bounded by
      // startTimeoutMs each): the pools' 30 s idle-in-transaction limit (lib/db.ts) is for sessions
      // that went silent, not for this wait, so the relay's own transaction gets a longer one.
      await client.query("SET LOCAL idle_in_transaction_session_timeout = '5min'");
      const jobs = await this.store.claimDue(client, this.options.batchSize);
      const claimed = jobs.length;
      const started: string[] = [];
      const failed: Array<{ workflowId: string; error: unknown }> = [];
      // One failure (Temporal away) ends the pass's new starts: the rest stay due for the next pass
      // rather than each waiting out its own timeout against a server that is not there.
      let broken = false;
      let next = 0;
      const lane = async () => {
        while (next < jobs.length && !broken) {
          const job = jobs[next++] as IntakeJob;
          try {
            const outcome = await startInboundWorkflow(
              temporal,
              { taskQueue, deadline: new Date(Date.now() + this.options.startTimeoutMs) },
              job,
            );
            started.push(job.workflowId);
            const counted = outcome.stopped ? 'stopped' : outcome.started ? 'started' : 'existed';
            metrics.intakeStarts.inc({ by: 'relay', outcome: counted });
            if (outcome.stopped)
              logger.info(
                { workflowId: job.workflowId },
                'intake relay: a person stopped this message’s workflow; it stays stopped (not started again)',
              );
            else
              logger.info({ workflowId: job.workflowId, started: outcome.started }, 'intake relay: workflow started');
          } catch (error) {
            broken = true;
            failed.push({ workflowId: job.workflowId, error });
            metrics.intakeStarts.inc({ by: 'relay', outcome: 'failed' });
            logger.warn(
              { workflowId: job.workflowId, errorClass: startErrorClass(error).name },
              'intake relay: workflow start failed; backing off',
            );
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.options.concurrency, jobs.length) }, lane));
      await this.store.markStarted(started, client);
      const dead = await this.store.markFailed(failed, client);
      return { claimed, started, failed, dead };
    });
    for (const workflowId of dead)
      logger.warn(
        { workflowId, errorClass: startErrorClass(failed.find((f) => f.workflowId === workflowId)?.error).name },
        'intake relay: row moved to the dead letter (npm run replay -- --stuck lists it; --retry-stuck retries it)',
      );
    for (const failure of failed) this.startFailed(failure.error);
    if (failed.length === 0 && started.length > 0) await this.temporalAnswered();
    return failed.length > 0 ? 0 : claimed;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let full = false;
      let waitMs = this.options.pollMs;
      try {
        full = (await this.pass()) >= this.options.batchSize;
        if (this.passFailures > 0) this.deps.logger.info('intake relay: Postgres answers again (DATABASE_URL)');
        this.passFailures = 0;
      } catch (error) {
        // Postgres away: the webhook answers 500 meanwhile, and the rows wait where they are. One
        // line per try, naming the variable, and the tries back off: no stack trace every second.
        this.passFailures += 1;
        waitMs = Math.min(PASS_BACKOFF_MAX_MS, this.options.pollMs * 2 ** Math.min(this.passFailures - 1, 10));
        const refused = postgresAuthenticationFailure(error);
        const code = connectionErrorCode(error);
        if (refused !== null)
          this.deps.logger.warn(
            { code: 'auth', retryInMs: waitMs, failures: this.passFailures },
            `intake relay: Postgres refused DATABASE_URL's credentials: ${refused}; trying again in ${Math.round(waitMs / 1000)} s`,
          );
        else if (code !== undefined)
          this.deps.logger.warn(
            { code, retryInMs: waitMs, failures: this.passFailures },
            `intake relay: cannot reach Postgres (DATABASE_URL): ${code}; trying again in ${Math.round(waitMs / 1000)} s`,
          );
        else
          this.deps.logger.warn(
            { err: error, retryInMs: waitMs, failures: this.passFailures },
            'intake relay: pass failed; trying again',
          );
      }
      if (!full && !this.stopped) await this.sleep(waitMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wakeUp = () => {
        clearTimeout(this.sleepTimer);
        this.wakeUp = undefined;
        resolve();
      };
      this.sleepTimer = setTimeout(() => this.wakeUp?.(), ms);
    });
  }
}

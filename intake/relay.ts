import type { Client } from '@temporalio/client';
import { checkOut, type Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import * as metrics from '../lib/metrics';
import { IntakeStore, type IntakeJob } from './intake-store';
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

export class IntakeRelay {
  private stopped = true;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  /** A start failed since Temporal last answered: the next success brings the backed-off rows forward. */
  private sawFailure = false;

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
   * A start succeeded somewhere in this process (the starter, or this relay): if starts had been
   * failing, Temporal is back, so the rows backed off meanwhile are made due and a pass runs now.
   */
  async temporalAnswered(): Promise<void> {
    if (!this.sawFailure) return;
    this.sawFailure = false;
    try {
      const rows = await this.store.bringForward();
      this.deps.logger.info({ rows }, 'intake relay: Temporal answers again; backed-off rows are due now');
    } catch (error) {
      this.sawFailure = true;
      this.deps.logger.warn({ err: error }, 'intake relay: could not bring backed-off rows forward');
    }
    this.wake();
  }

  /** A start failed somewhere in this process. */
  startFailed(): void {
    this.sawFailure = true;
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
    const client = await checkOut(db);
    try {
      await client.query('BEGIN');
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
            metrics.intakeStarts.inc({ by: 'relay', outcome: outcome.started ? 'started' : 'existed' });
            logger.info({ workflowId: job.workflowId, started: outcome.started }, 'intake relay: workflow started');
          } catch (error) {
            broken = true;
            failed.push({ workflowId: job.workflowId, error });
            metrics.intakeStarts.inc({ by: 'relay', outcome: 'failed' });
            logger.warn({ workflowId: job.workflowId, err: error }, 'intake relay: workflow start failed; backing off');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.options.concurrency, jobs.length) }, lane));
      await this.store.markStarted(started, client);
      await this.store.markFailed(failed, client);
      await client.query('COMMIT');
      if (failed.length > 0) this.startFailed();
      else if (started.length > 0) await this.temporalAnswered();
      return failed.length > 0 ? 0 : claimed;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let full = false;
      try {
        full = (await this.pass()) >= this.options.batchSize;
      } catch (error) {
        // Postgres away: the webhook answers 500 meanwhile, and the rows wait where they are.
        this.deps.logger.warn({ err: error }, 'intake relay: pass failed; trying again');
      }
      if (!full && !this.stopped) await this.sleep(this.options.pollMs);
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

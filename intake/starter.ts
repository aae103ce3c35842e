import type { Client } from '@temporalio/client';
import type { Logger } from '../lib/logger';
import * as metrics from '../lib/metrics';
import { startErrorClass, type IntakeJob, type IntakeStore } from './intake-store';
import { startInboundWorkflow } from './start-workflow';

/**
 * Starts a just-accepted job's workflow in the process that accepted it, right after the commit
 * and without holding the webhook's answer. A small in-process queue with bounded concurrency:
 * when it is full the job is not offered at all (its row is due for the relay at once), so a
 * burst costs memory and Temporal calls in proportion to STARTER limits, never more.
 */

export interface StarterOptions {
  /** Starts in flight at once: each is one quick Temporal call. */
  concurrency: number;
  /** Jobs waiting beyond those; past this, `hasRoom()` is false and the relay takes new rows. */
  capacity: number;
  /** One start's deadline: past it the row is left to the relay. */
  startTimeoutMs: number;
  /**
   * The relay leaves a new row alone this long (its `next_attempt_at`). A job that waited in the
   * queue until less than one start timeout of that is left remains is dropped: the relay may take it.
   */
  headStartMs: number;
}

/** Ten seconds: twice the start timeout, so a start begun in time never races the relay's. */
export const STARTER_DEFAULTS: StarterOptions = {
  concurrency: 16,
  capacity: 2_000,
  startTimeoutMs: 5_000,
  headStartMs: 10_000,
};

/** Marks of started rows are written together, one UPDATE per this many ms (or per 200 rows). */
const MARK_FLUSH_MS = 20;
const MARK_FLUSH_ROWS = 200;

export class IntakeStarter {
  private readonly queue: Array<{ job: IntakeJob; at: number }> = [];
  private running = 0;
  private marks: string[] = [];
  private markTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;
  private idle: Array<() => void> = [];

  constructor(
    private readonly deps: {
      store: IntakeStore;
      temporal: Client;
      taskQueue: string;
      logger: Logger;
      /** Each start's result, for the relay (a success after failing to reach Temporal means it is back). */
      onStart?: (error: unknown) => void;
    },
    readonly options: StarterOptions = STARTER_DEFAULTS,
  ) {}

  hasRoom(): boolean {
    return !this.closed && this.queue.length < this.options.capacity;
  }

  /** False when the queue is full or closing: the row stays for the relay. */
  offer(job: IntakeJob): boolean {
    if (!this.hasRoom()) return false;
    this.queue.push({ job, at: Date.now() });
    this.pump();
    return true;
  }

  /** Finishes the starts in flight (not the queued ones: their rows go to a relay) and writes the marks. */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    if (this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    await this.flushMarks();
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const next = this.queue.shift() as { job: IntakeJob; at: number };
      if (Date.now() - next.at > this.options.headStartMs - this.options.startTimeoutMs) {
        metrics.intakeStarts.inc({ by: 'starter', outcome: 'left_to_relay' });
        continue;
      }
      this.running += 1;
      void this.start(next.job).finally(() => {
        this.running -= 1;
        if (this.running === 0 && this.queue.length === 0) for (const resolve of this.idle.splice(0)) resolve();
        this.pump();
      });
    }
  }

  private async start(job: IntakeJob): Promise<void> {
    const { logger, temporal, taskQueue, store } = this.deps;
    try {
      const { started, stopped } = await startInboundWorkflow(
        temporal,
        { taskQueue, deadline: new Date(Date.now() + this.options.startTimeoutMs) },
        job,
      );
      metrics.intakeStarts.inc({ by: 'starter', outcome: stopped ? 'stopped' : started ? 'started' : 'existed' });
      if (stopped)
        logger.info(
          { workflowId: job.workflowId, eventId: job.eventId },
          'intake: a person stopped this message’s workflow; it stays stopped (not started again)',
        );
      else logger.info({ workflowId: job.workflowId, eventId: job.eventId, started }, 'intake: workflow started');
      this.mark(job.workflowId);
      this.deps.onStart?.(undefined);
    } catch (error) {
      metrics.intakeStarts.inc({ by: 'starter', outcome: 'failed' });
      this.deps.onStart?.(error);
      logger.warn(
        { workflowId: job.workflowId, eventId: job.eventId, errorClass: startErrorClass(error).name },
        'intake: workflow start failed; the relay retries it',
      );
      await store.markFailed([{ workflowId: job.workflowId, error }]).catch((markError: unknown) => {
        logger.warn({ workflowId: job.workflowId, err: markError }, 'intake: could not record the failed start');
      });
    }
  }

  private mark(workflowId: string): void {
    this.marks.push(workflowId);
    if (this.marks.length >= MARK_FLUSH_ROWS) void this.flushMarks();
    else this.markTimer ??= setTimeout(() => void this.flushMarks(), MARK_FLUSH_MS);
  }

  private flushMarks(): Promise<void> {
    clearTimeout(this.markTimer);
    this.markTimer = undefined;
    const ids = this.marks;
    this.marks = [];
    // Serialized, so close() waits for every mark; a lost mark only means the relay starts the
    // row once more, which finds the workflow (USE_EXISTING / ALREADY_EXISTS) and marks it.
    this.flushing = this.flushing.then(() =>
      this.deps.store.markStarted(ids).catch((error: unknown) => {
        this.deps.logger.warn({ rows: ids.length, err: error }, 'intake: could not mark started rows; the relay will');
      }),
    );
    return this.flushing;
  }
}

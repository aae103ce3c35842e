import type { Client } from '@temporalio/client';
import { AgentMailError, type AgentMailClient } from 'agentmail';
import type { Db } from '../lib/db';
import { failpoint } from '../lib/failpoints';
import type { Logger } from '../lib/logger';
import { isAgentMailError, providerErrorText } from '../lib/provider-errors';
import { catchUpInbox, CatchUpRequestError, type CatchUpRequest, type CatchUpSummary } from './catch-up';
import { InboxCursors } from './inbox-cursors';
import {
  IntakeStore,
  type DeadLetterPolicy,
  type DeliveryOutcome,
  type Handover,
  type IntakeBacklog,
  type IntakeJob,
} from './intake-store';
import { IntakeRelay, RELAY_DEFAULTS, type RelayOptions } from './relay';
import { IntakeStarter, STARTER_DEFAULTS, type StarterOptions } from './starter';
import { stoppedRuns } from './start-workflow';

/**
 * The intake of one deployment (one task queue): the table, the starter that follows each
 * commit, and the relay. Built once per API process; `close()` stops the relay after its pass
 * and lets the starts in flight finish. Its callers (the webhook route, the catch-ups) hand
 * messages over through `accept()` and `createCatchUp()`; how a row becomes a workflow (the
 * head start, the starter's queue, the relay) is the intake's own business.
 */
export interface Intake {
  store: IntakeStore;
  starter: IntakeStarter;
  relay: IntakeRelay | undefined;
  /** Whether this process has seen the event recorded (no database: a retry storm costs nothing). */
  remembers(eventId: string): boolean;
  /** Another event type: recorded so its retries are known, nothing else. */
  recordIgnored(event: { eventId: string; eventType: string }, timeoutMs?: number): Promise<boolean>;
  /**
   * A message.received delivery: ONE statement records the event and the job; once it has
   * committed, this process's starter is offered the job (a head start on the relay), and a job
   * it cannot take is due for the relay at once.
   */
  accept(
    delivery: Handover & { eventId: string },
    options?: { timeoutMs?: number | undefined },
  ): Promise<{ outcome: DeliveryOutcome; job: IntakeJob }>;
  close(): Promise<void>;
}

export interface IntakeOptions {
  db: Db;
  temporal: Client;
  taskQueue: string;
  logger: Logger;
  /** false: no relay in this process (a test that wants to watch rows stay unstarted). */
  relay?: boolean | undefined;
  starterOptions?: Partial<StarterOptions> | undefined;
  relayOptions?: Partial<RelayOptions> | undefined;
  /** When the relay sets a row aside (INTAKE_DEAD_LETTER_*); the defaults otherwise. */
  deadLetter?: DeadLetterPolicy | undefined;
}

export function createIntake(options: IntakeOptions): Intake {
  const { db, temporal, taskQueue, logger } = options;
  const store = new IntakeStore(db, taskQueue, options.deadLetter);
  const relay =
    options.relay === false
      ? undefined
      : new IntakeRelay({ db, temporal, taskQueue, logger, store }, { ...RELAY_DEFAULTS, ...options.relayOptions });
  const starter = new IntakeStarter(
    {
      store,
      temporal,
      taskQueue,
      logger,
      // The starter sees Temporal's return first (webhooks keep coming): the relay then stops waiting out its backoff.
      onStart: (error) => (error === undefined ? void relay?.temporalAnswered() : relay?.startFailed(error)),
    },
    { ...STARTER_DEFAULTS, ...options.starterOptions },
  );
  /** A row the starter could not take after all: due for the relay now, not after its head start. */
  const leaveToRelay = (workflowId: string) => {
    store.dueNow(workflowId).then(
      () => relay?.wake(),
      (error: unknown) => logger.warn({ workflowId, err: error }, 'intake: could not hand a row to the relay early'),
    );
  };
  return {
    store,
    starter,
    relay,
    remembers: (eventId) => store.remembers(eventId),
    recordIgnored: (event, timeoutMs) => store.recordIgnored(event, timeoutMs),
    accept: async (delivery, acceptOptions = {}) => {
      // The relay leaves the new row to this process's starter for a while, unless the starter is full.
      const headStartMs = starter.hasRoom() ? starter.options.headStartMs : 0;
      const accepted = await store.acceptDelivery(delivery, { headStartMs, timeoutMs: acceptOptions.timeoutMs });
      failpoint('intake.after-commit');
      // The queue filled between the check and the commit (a burst): the row is the relay's now.
      if (accepted.outcome === 'queued' && !starter.offer(accepted.job) && headStartMs > 0)
        leaveToRelay(accepted.job.workflowId);
      return accepted;
    },
    close: async () => {
      await relay?.close();
      await starter.close();
    },
  };
}

/** A catch-up bound to one deployment's intake: what `npm run replay`, /admin/replay and the watchdog run. */
export interface CatchUp {
  run(request: CatchUpRequest): Promise<CatchUpSummary>;
  /** The task queue's unstarted rows, for the report's last line. */
  backlog(): Promise<IntakeBacklog>;
}

export interface CatchUpOptions {
  db: Db;
  agentmail: AgentMailClient;
  /** The task queue whose relay starts the rows (TEMPORAL_TASK_QUEUE). */
  taskQueue: string;
  operationRetentionDays: number;
  /** To leave out the messages whose run a person stopped (and count them); without it the start still does. */
  temporal?: Client | undefined;
}

/** Each page's question to Temporal waits this long at most: the catch-up itself needs no Temporal. */
const STOPPED_LOOKUP_TIMEOUT_MS = 5_000;

/** The one place a catch-up's dependencies are put together. */
export function createCatchUp(options: CatchUpOptions): CatchUp {
  const store = new IntakeStore(options.db, options.taskQueue);
  const { temporal } = options;
  // Temporal away: asked once, then not again in this catch-up (each page would wait out the timeout).
  let temporalAway = false;
  const lookUp = async (ids: string[]) => {
    if (!temporal || temporalAway) return new Set<string>();
    try {
      return await stoppedRuns(temporal, ids, new Date(Date.now() + STOPPED_LOOKUP_TIMEOUT_MS));
    } catch (error) {
      temporalAway = true;
      throw error;
    }
  };
  const deps = {
    agentmail: options.agentmail,
    intake: store,
    cursors: new InboxCursors(options.db),
    operationRetentionDays: options.operationRetentionDays,
    stoppedRuns: temporal ? lookUp : undefined,
  };
  return { run: (request) => catchUpInbox(deps, request), backlog: () => store.backlog() };
}

/**
 * Why a catch-up of one inbox did not run, in the words its callers answer with:
 * - `request`: the request cannot be served as asked (a person must choose: a start time, a newer one);
 * - `no_inbox`: AgentMail has no such inbox (deleted, or a typo);
 * - `provider`: AgentMail failed otherwise (status and name only: the SDK's message holds its whole body).
 * undefined: not a catch-up's own failure (Postgres, a bug): the caller's usual handling.
 */
export type CatchUpFailure =
  { kind: 'request'; message: string } | { kind: 'no_inbox'; message: string } | { kind: 'provider'; message: string };

export function classifyCatchUpError(error: unknown): CatchUpFailure | undefined {
  if (error instanceof CatchUpRequestError) return { kind: 'request', message: error.message };
  if (error instanceof AgentMailError && error.statusCode === 404)
    return { kind: 'no_inbox', message: 'AgentMail has no such inbox' };
  if (isAgentMailError(error)) return { kind: 'provider', message: providerErrorText(error) };
  return undefined;
}

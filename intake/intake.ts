import type { Client } from '@temporalio/client';
import type { Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import { IntakeStore } from './intake-store';
import { IntakeRelay, RELAY_DEFAULTS, type RelayOptions } from './relay';
import { IntakeStarter, STARTER_DEFAULTS, type StarterOptions } from './starter';

/**
 * The intake of one deployment (one task queue): the table, the starter that follows each
 * commit, and the relay. Built once per API process; `close()` stops the relay after its pass
 * and lets the starts in flight finish.
 */
export interface Intake {
  store: IntakeStore;
  starter: IntakeStarter;
  relay: IntakeRelay | undefined;
  /** A row the starter could not take after all: due for the relay now, not after its head start. */
  leaveToRelay(workflowId: string): void;
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
}

export function createIntake(options: IntakeOptions): Intake {
  const { db, temporal, taskQueue, logger } = options;
  const store = new IntakeStore(db, taskQueue);
  const relay =
    options.relay === false
      ? undefined
      : new IntakeRelay({ db, temporal, taskQueue, logger }, { ...RELAY_DEFAULTS, ...options.relayOptions });
  const starter = new IntakeStarter(
    {
      store,
      temporal,
      taskQueue,
      logger,
      // The starter sees Temporal's return first (webhooks keep coming): the relay then stops waiting out its backoff.
      onStart: (ok) => (ok ? void relay?.temporalAnswered() : relay?.startFailed()),
    },
    { ...STARTER_DEFAULTS, ...options.starterOptions },
  );
  return {
    store,
    starter,
    relay,
    leaveToRelay: (workflowId) => {
      store.dueNow(workflowId).then(
        () => relay?.wake(),
        (error: unknown) => logger.warn({ workflowId, err: error }, 'intake: could not hand a row to the relay early'),
      );
    },
    close: async () => {
      await relay?.close();
      await starter.close();
    },
  };
}

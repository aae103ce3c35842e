import { PostgresTickets } from '../../activities/ticket/postgres-tickets';
import { activityConfig } from '../../lib/config';
import { connectTemporalWorker } from '../../lib/temporal-connection';
import { createReplyonceWorker } from '../../worker/create-worker';
import { promoteWhenPolling, workerBuildId } from '../../worker/deployment';
import { testEnv } from './env';
import type { Harness } from './harness';

/**
 * A worker on a harness's task queue (one started with `worker: false`), with this configuration:
 * as a worker process after a redeploy, or the next one after a stop. Resolves once it polls;
 * gives back the function that stops it, as SIGTERM does.
 */
export async function startWorker(
  h: Harness,
  overrides: Parameters<typeof activityConfig>[0] = {},
): Promise<() => Promise<void>> {
  const connection = await connectTemporalWorker(testEnv.temporal);
  const worker = await createReplyonceWorker({
    connection,
    namespace: testEnv.namespace,
    taskQueue: h.taskQueue,
    workflowBundlePath: testEnv.workflowBundle,
    deployment: { deploymentName: h.deploymentName, buildId: workerBuildId() },
    deps: {
      db: h.db,
      agentmail: h.agentmail,
      drafter: h.drafter,
      tickets: new PostgresTickets(h.db),
      config: activityConfig({
        OPERATION_LEASE_MS: 5_000,
        APPROVAL_TIMEOUT_MS: 60_000,
        REPLY_COALESCE_MS: 0,
        ...overrides,
      }),
    },
  });
  const running = worker.run();
  await promoteWhenPolling(h.client, { deploymentName: h.deploymentName, buildId: workerBuildId() });
  return async () => {
    worker.shutdown();
    await running;
    await connection.close();
  };
}

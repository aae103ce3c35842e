// `npm run deploy -- <command>`: shows and moves the Worker Deployment's routing (Worker
// Versioning; docs/changing-the-workflow.md). Connects as every process does (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TLS/API key through Temporal's environment configuration); the deployment is
// WORKER_DEPLOYMENT_NAME (default `replyonce`).
//
//   status                  the current and ramping builds, every build's state and its open pinned runs
//   promote <build>         <build> becomes current: new messages start on it (a ramp of it ends)
//   ramp <build> <percent>  <percent> of new messages start on <build>, the rest on the current build
//   rollback [<build>]      a ramp: stopped. Otherwise <build>, or the build current before this one,
//                           becomes current again. Runs already started stay on their build.
import { Client } from '@temporalio/client';
import { loadTemporalConfig } from '../lib/config';
import { connectTemporalClient } from '../lib/temporal-connection';
import {
  clearRampingVersion,
  DEFAULT_DEPLOYMENT_NAME,
  describeDeployment,
  onceItsQueuesPoll,
  setCurrentVersion,
  setRampingVersion,
  TASK_QUEUES_REGISTER_MS,
  untilItPollsQueuesOf,
  type DeploymentStatus,
} from '../worker/deployment';
import { runMain, SetupError } from './services/main';
import { INBOUND_MESSAGE_WORKFLOW } from '../contract';

const USAGE = 'usage: npm run deploy -- status | promote <build> | ramp <build> <percent> | rollback [<build>]';
/** How long a deployment the server does not describe yet is looked for again before the command gives up. */
const DESCRIBE_RETRY_MS = 15_000;

async function main(): Promise<number> {
  const [command, ...args] = process.argv.slice(2);
  if (!command || !['status', 'promote', 'ramp', 'rollback'].includes(command)) throw new SetupError(USAGE);
  const config = loadTemporalConfig();
  const deploymentName = process.env.WORKER_DEPLOYMENT_NAME?.trim() || DEFAULT_DEPLOYMENT_NAME;
  const connection = await connectTemporalClient(config.temporal, { connectTimeoutMs: 10_000 });
  try {
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    // The server can answer NOT_FOUND for a deployment a moment after its workers first polled (its
    // description lags the listing, as a new version's does): a few looks before saying it has none.
    let status = await describeDeployment(client, deploymentName);
    for (const deadline = Date.now() + DESCRIBE_RETRY_MS; status === null && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      status = await describeDeployment(client, deploymentName);
    }
    if (status === null)
      throw new SetupError(
        `no worker of deployment "${deploymentName}" has polled namespace ${config.TEMPORAL_NAMESPACE} yet: start the workers first (WORKER_DEPLOYMENT_NAME names the deployment)`,
      );
    const known = (build: string | undefined, what: string): string => {
      if (!build) throw new SetupError(`${what}\n${USAGE}`);
      if (!status.versions.some((v) => v.buildId === build))
        throw new SetupError(
          `build ${build} has no workers in deployment ${deploymentName} (known: ${status.versions.map((v) => v.buildId).join(', ') || 'none'}); start its workers first`,
        );
      return build;
    };
    // A build whose workers have just started is listed in the deployment at its first poll, a moment
    // before the server can describe it, and polls its task queues one by one: a routing change asked
    // in between fails (the version "not found", or FAILED_PRECONDITION "missing active task
    // queues"). Wait for what the change needs: the build polls every queue the current build polls.
    const whenPolling = async <T>(buildId: string, change: () => Promise<T>) => {
      const deadline = Date.now() + TASK_QUEUES_REGISTER_MS;
      const missing = await untilItPollsQueuesOf(client, { deploymentName, buildId }, status.current, {
        onWait: (queues) =>
          console.log(
            `waiting for ${buildId}'s workers to poll every task queue (a worker just started registers each in turn): ${queues.join(', ')}…`,
          ),
      });
      try {
        return await onceItsQueuesPoll(change, {
          timeoutMs: Math.max(0, deadline - Date.now()),
          onWait: () => console.log(`waiting for the server to see ${buildId} poll every task queue…`),
        });
      } catch (error) {
        if (missing.length === 0) throw error;
        throw new SetupError(
          `${buildId}'s workers do not poll ${missing.join(', ')} after ${TASK_QUEUES_REGISTER_MS / 1000} s (the current build ${status.current ?? ''} does): ` +
            `are they running, on the same TEMPORAL_TASK_QUEUE and WORKER_DEPLOYMENT_NAME? The server answered: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    };
    switch (command) {
      case 'status':
        await printStatus(client, status);
        return 0;
      case 'promote': {
        const buildId = known(args[0], 'promote needs the build id to make current');
        await whenPolling(buildId, () => setCurrentVersion(client, { deploymentName, buildId }));
        console.log(`${deploymentName}: ${buildId} is current (was ${status.current ?? 'none'})`);
        return 0;
      }
      case 'ramp': {
        const buildId = known(args[0], 'ramp needs a build id and a percentage');
        const percentage = Number(args[1]);
        if (!Number.isFinite(percentage) || percentage < 0 || percentage > 100)
          throw new SetupError(`the percentage must be a number from 0 to 100, not ${String(args[1])}`);
        if (buildId === status.current) throw new SetupError(`${buildId} is already current: nothing to ramp`);
        await whenPolling(buildId, () => setRampingVersion(client, { deploymentName, buildId }, percentage));
        console.log(
          `${deploymentName}: ${percentage}% of new runs start on ${buildId}, the rest on ${status.current ?? 'unversioned workers'}`,
        );
        return 0;
      }
      case 'rollback': {
        if (status.ramping && args[0] === undefined) {
          await clearRampingVersion(client, deploymentName);
          console.log(
            `${deploymentName}: ramp of ${status.ramping.buildId} stopped; new runs start on ${status.current ?? 'unversioned workers'}`,
          );
          return 0;
        }
        // The build that was current last: draining (or drained) since its routing last changed.
        const left = (v: (typeof status.versions)[number]) =>
          Math.max(v.lastCurrentAt?.getTime() ?? 0, v.routingChangedAt?.getTime() ?? 0);
        const previous =
          args[0] ??
          status.versions
            .filter((v) => v.buildId !== status.current && (v.status === 'DRAINING' || v.status === 'DRAINED'))
            .sort((a, b) => left(b) - left(a))[0]?.buildId;
        const buildId = known(previous, 'no build was current before this one: name the build to roll back to');
        await whenPolling(buildId, () => setCurrentVersion(client, { deploymentName, buildId }));
        console.log(
          `${deploymentName}: rolled back to ${buildId} (was ${status.current ?? 'none'}); runs started on ${status.current ?? 'it'} stay there`,
        );
        return 0;
      }
      default:
        throw new SetupError(USAGE);
    }
  } finally {
    await connection.close();
  }
}

async function printStatus(client: Client, status: DeploymentStatus): Promise<void> {
  console.log(`deployment ${status.deploymentName}`);
  console.log(`  current  ${status.current ?? 'none (new runs wait for a current version)'}`);
  console.log(`  ramping  ${status.ramping ? `${status.ramping.buildId} at ${status.ramping.percentage}%` : 'none'}`);
  console.log('  builds');
  for (const version of status.versions) {
    const open = await openPinnedRuns(client, status.deploymentName, version.buildId);
    const drainage = version.drainage && version.drainage !== 'UNSPECIFIED' ? ` (${version.drainage})` : '';
    console.log(
      `    ${version.buildId.padEnd(28)} ${`${version.status}${drainage}`.padEnd(22)} ${open} open run${open === '1' ? '' : 's'}`,
    );
  }
}

/**
 * Message runs still open on a build: they are the pinned ones, which wait for its workers.
 * (The schedules' runs auto-upgrade: they move to the current build.)
 */
async function openPinnedRuns(client: Client, deploymentName: string, buildId: string): Promise<string> {
  try {
    const { count } = await client.workflow.count(
      `TemporalWorkerDeploymentVersion = '${deploymentName}:${buildId}' AND ExecutionStatus = 'Running' AND WorkflowType = '${INBOUND_MESSAGE_WORKFLOW}'`,
    );
    return String(count);
  } catch {
    return '?';
  }
}

if (require.main === module) runMain(main);

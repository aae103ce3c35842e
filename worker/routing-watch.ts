import type { Client } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { Logger } from 'pino';
import { describeDeployment, versionLabel } from './deployment';

/**
 * A first production start answers nothing until someone promotes a build: a Worker Deployment
 * with no current version dispatches new runs to no versioned worker, so every message waits at
 * its first workflow task while the workers poll and log nothing (docs/changing-the-workflow.md).
 * This watch says so where an operator looks: a warning in the log naming the command, /readyz
 * (worker/metrics-server.ts) answering 503 with the reason, and the unanswered-messages gauge
 * counting every waiting run at once (worker/unanswered.ts). It runs where nobody promotes on
 * start (WORKER_PROMOTE_ON_START unset, as in production).
 */

/** How often the routing is read while it is fine: a deployment is rarely left without a current build. */
const CHECK_EVERY_MS = 60_000;
/** While nothing is current: soon enough that /readyz turns healthy within seconds of the promote. */
const RECHECK_PROBLEM_MS = 5_000;
/** The warning repeats at most this often (a log line per recheck would drown the log). */
const WARN_EVERY_MS = 5 * 60_000;

export interface RoutingWatch {
  /** Why this worker does no work (no current version), or null when the deployment routes runs. */
  problem(): string | null;
  stop(): void;
}

export function noCurrentVersionProblem(version: WorkerDeploymentVersion): string {
  return (
    `the worker deployment ${version.deploymentName} has no current version, so Temporal dispatches new runs to ` +
    `no worker and every message waits: make this build current with \`npm run deploy -- promote ${version.buildId}\`` +
    ' (docs/changing-the-workflow.md)'
  );
}

export function watchDeploymentRouting(options: {
  client: Client;
  version: WorkerDeploymentVersion;
  log: Pick<Logger, 'warn' | 'info'>;
}): RoutingWatch {
  const { client, version, log } = options;
  let problem: string | null = null;
  let warnedAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const check = async () => {
    const status = await describeDeployment(client, version.deploymentName).catch(() => undefined);
    // An unanswered read changes nothing: the next check asks again.
    if (status !== undefined) {
      const before = problem;
      // null: no worker of this deployment has polled yet (this one is about to); the same as nothing current.
      problem = status?.current ? null : noCurrentVersionProblem(version);
      if (problem !== null && Date.now() - warnedAt >= WARN_EVERY_MS) {
        warnedAt = Date.now();
        log.warn({ version: versionLabel(version), promote: `npm run deploy -- promote ${version.buildId}` }, problem);
      }
      if (before !== null && problem === null)
        log.info(
          { version: versionLabel(version), current: status?.current },
          'the worker deployment has a current version',
        );
    }
    if (!stopped)
      timer = setTimeout(() => void check(), problem === null ? CHECK_EVERY_MS : RECHECK_PROBLEM_MS).unref();
  };
  void check();
  return {
    problem: () => problem,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

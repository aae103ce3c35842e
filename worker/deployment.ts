// Worker Versioning: which Worker Deployment Version a worker is, and the calls that move a
// deployment's routing (current version, ramp). Used by the worker's start-up (promote on start,
// for dev and tests), by `npm run deploy` and by the tests. The TypeScript client has no
// high-level API for worker deployments yet, so these are the WorkflowService calls the
// `temporal worker deployment …` commands make.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/** The checkout or the image's /app: where package.json is (the build runs from dist/, one level further down). */
const ROOT = (() => {
  for (let dir = path.resolve(__dirname, '..'); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'workflows'))) return dir;
    if (path.dirname(dir) === dir) return path.resolve(__dirname, '..');
  }
})();

/** The default deployment name: one per environment is enough (a name holds every build of the worker). */
export const DEFAULT_DEPLOYMENT_NAME = 'replyonce';

/**
 * The build id: WORKER_BUILD_ID when set (a CI pipeline's release tag, say); otherwise the package
 * version and the commit (`0.2.0-53ade0b1c2d3`). Without git (a container image has no .git), the
 * commit is replaced by a hash of the workflow code itself (workflows/ and contract/), so two images
 * with the same id always run the same workflow code: a pinned run may move between their workers.
 */
export function workerBuildId(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.WORKER_BUILD_ID?.trim();
  if (given) return given;
  const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  return `${version}-${gitCommit() ?? `src${workflowSourceHash()}`}`;
}

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
  } catch {
    return undefined;
  }
}

/** Twelve hex digits of a hash over every file the workflow bundle is built from. */
export function workflowSourceHash(): string {
  const hash = createHash('sha256');
  for (const dir of ['workflows', 'contract']) {
    const files = readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
      .map((entry) => path.join(entry.parentPath, entry.name))
      .sort();
    for (const file of files) hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file));
  }
  return hash.digest('hex').slice(0, 12);
}

/** The `name:build` form the CLI and the Web UI show. */
export const versionLabel = (v: WorkerDeploymentVersion) => `${v.deploymentName}:${v.buildId}`;

export interface DeploymentVersionStatus {
  buildId: string;
  /** INACTIVE, CURRENT, RAMPING, DRAINING, DRAINED (the server's view). */
  status: string;
  /** For a draining version: DRAINING while pinned runs are still open on it, DRAINED once none is. */
  drainage: string | null;
  createdAt: Date | null;
  /** When it last stopped being current (null: never current, or current now): what a rollback goes back to. */
  lastCurrentAt: Date | null;
  /** When its routing (current, ramping, neither) last changed. */
  routingChangedAt: Date | null;
}

export interface DeploymentStatus {
  deploymentName: string;
  current: string | null;
  ramping: { buildId: string; percentage: number } | null;
  versions: DeploymentVersionStatus[];
}

const { VersionDrainageStatus, WorkerDeploymentVersionStatus } = temporal.api.enums.v1;
const enumName = (names: Record<string, string | number>, value: number | null | undefined, prefix: string) =>
  value == null ? null : String(names[value] ?? value).replace(prefix, '');

/** The deployment's routing and versions; null when no worker of that name has polled yet. */
export async function describeDeployment(client: Client, deploymentName: string): Promise<DeploymentStatus | null> {
  let response: temporal.api.workflowservice.v1.IDescribeWorkerDeploymentResponse;
  try {
    response = await client.workflowService.describeWorkerDeployment({
      namespace: client.options.namespace,
      deploymentName,
    });
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
  const info = response.workerDeploymentInfo;
  const routing = info?.routingConfig;
  const ramping = routing?.rampingDeploymentVersion?.buildId;
  return {
    deploymentName,
    current: routing?.currentDeploymentVersion?.buildId ?? null,
    ramping: ramping ? { buildId: ramping, percentage: routing?.rampingVersionPercentage ?? 0 } : null,
    versions: (info?.versionSummaries ?? []).map((summary) => ({
      buildId: summary.deploymentVersion?.buildId ?? '',
      status:
        enumName(WorkerDeploymentVersionStatus, summary.status, 'WORKER_DEPLOYMENT_VERSION_STATUS_') ?? 'UNSPECIFIED',
      drainage: enumName(VersionDrainageStatus, summary.drainageStatus, 'VERSION_DRAINAGE_STATUS_'),
      createdAt: timestamp(summary.createTime),
      lastCurrentAt: timestamp(summary.lastCurrentTime),
      routingChangedAt: timestamp(summary.routingUpdateTime),
    })),
  };
}

/** Makes `buildId` the current version: every new run, and every auto-upgrade run's next task, goes to it. */
export async function setCurrentVersion(
  client: Client,
  version: WorkerDeploymentVersion,
  options: { identity?: string } = {},
): Promise<void> {
  await client.workflowService.setWorkerDeploymentCurrentVersion({
    namespace: client.options.namespace,
    deploymentName: version.deploymentName,
    buildId: version.buildId,
    identity: options.identity ?? 'replyonce deploy',
  });
}

/** Sends `percentage` of new runs to `buildId` (the rest to the current version); 0 keeps it ramping at none. */
export async function setRampingVersion(
  client: Client,
  version: WorkerDeploymentVersion,
  percentage: number,
  options: { identity?: string } = {},
): Promise<void> {
  await client.workflowService.setWorkerDeploymentRampingVersion({
    namespace: client.options.namespace,
    deploymentName: version.deploymentName,
    buildId: version.buildId,
    percentage,
    identity: options.identity ?? 'replyonce deploy',
  });
}

/**
 * How long `npm run deploy` waits for a build's workers to poll every task queue. The server lists a
 * build at its first poll and refuses to make current (or ramp) a build that does not yet poll every
 * queue the current build polls (FAILED_PRECONDITION): a build of 0.1 polled a second queue (its turn
 * keepers'), and on a loaded machine registration trails the start by seconds. Two minutes covers a cold start.
 */
export const TASK_QUEUES_REGISTER_MS = 120_000;

const { TaskQueueType } = temporal.api.enums.v1;

/**
 * The task queues a build's workers poll, as the server lists them (`<queue> (workflow)`, one per
 * queue and type); null while the server cannot describe the version yet. A build appears in its
 * deployment's list (describeDeployment) at its first poll, a moment before the version itself
 * answers: the routing change asked in that moment fails on the server's side ("Worker Deployment
 * Version not found", after its own few retries), not with the refusal onceItsQueuesPoll waits out.
 */
export async function pollingTaskQueues(client: Client, version: WorkerDeploymentVersion): Promise<string[] | null> {
  try {
    const response = await client.workflowService.describeWorkerDeploymentVersion({
      namespace: client.options.namespace,
      deploymentVersion: version,
    });
    return (response.workerDeploymentVersionInfo?.taskQueueInfos ?? [])
      .map((q) => `${q.name ?? ''} (${enumName(TaskQueueType, q.type, 'TASK_QUEUE_TYPE_')?.toLowerCase() ?? 'any'})`)
      .sort();
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

/**
 * Waits until `version` is known to the server and polls every task queue that `current` (the
 * build now current, if any) polls: the condition a routing change needs. Returns what is still
 * missing after `timeoutMs` (empty once it polls them all); `onWait` is told what it waits for, once.
 */
export async function untilItPollsQueuesOf(
  client: Client,
  version: WorkerDeploymentVersion,
  current: string | null,
  options: { timeoutMs?: number; onWait?: (missing: string[]) => void } = {},
): Promise<string[]> {
  const deadline = Date.now() + (options.timeoutMs ?? TASK_QUEUES_REGISTER_MS);
  const expected =
    current === null || current === version.buildId
      ? []
      : ((await pollingTaskQueues(client, { deploymentName: version.deploymentName, buildId: current })) ?? []);
  let told = false;
  for (let delay = 100; ; delay = Math.min(delay * 2, 1_000)) {
    const polled = await pollingTaskQueues(client, version);
    const missing =
      polled === null
        ? ['any task queue (the server does not know the build yet)']
        : expected.filter((q) => !polled.includes(q));
    if (missing.length === 0 || Date.now() + delay > deadline) return missing;
    if (!told) options.onWait?.(missing);
    told = true;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/**
 * Runs a routing change (set current, ramp) once the build polls all its task queues: while the
 * server answers that the build is missing a task queue the current build has, waits and asks
 * again (`onWait` is told once), up to `timeoutMs`. Any other answer is the caller's.
 * (`npm run deploy` first waits with untilItPollsQueuesOf; this covers the server's own view
 * catching up with what it described.)
 */
export async function onceItsQueuesPoll<T>(
  change: () => Promise<T>,
  options: { timeoutMs?: number; onWait?: (reason: string) => void } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? TASK_QUEUES_REGISTER_MS);
  let told = false;
  for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await change();
    } catch (error) {
      if (!isMissingTaskQueues(error) || Date.now() + delay > deadline) throw error;
      if (!told) options.onWait?.((error as Error).message);
      told = true;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** The server's refusal of a build that does not (yet) poll every task queue of the current one. */
function isMissingTaskQueues(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: number; message?: string };
  return code === 9 /* FAILED_PRECONDITION */ && /task ?queue/i.test(message ?? '');
}

/** Stops a ramp: new runs go to the current version only. */
export async function clearRampingVersion(client: Client, deploymentName: string): Promise<void> {
  await client.workflowService.setWorkerDeploymentRampingVersion({
    namespace: client.options.namespace,
    deploymentName,
    buildId: '',
    percentage: 0,
    identity: 'replyonce deploy',
  });
}

/**
 * Makes this worker's version current once the server knows it (the version exists from the
 * worker's first poll, a moment after the worker starts): for `npm run dev` and the tests, where
 * nobody runs `npm run deploy -- promote`. A version already current is left alone, so any number
 * of replicas may do this at once.
 */
export async function promoteWhenPolling(
  client: Client,
  version: WorkerDeploymentVersion,
  options: { timeoutMs?: number; stopped?: () => boolean } = {},
): Promise<'promoted' | 'already current'> {
  const deadline = Date.now() + (options.timeoutMs ?? 45_000);
  let lastError: unknown;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1_000)) {
    const status = await describeDeployment(client, version.deploymentName).catch((error: unknown) => {
      lastError = error;
      return null;
    });
    if (status?.current === version.buildId) return 'already current';
    if (status?.versions.some((v) => v.buildId === version.buildId)) {
      try {
        await setCurrentVersion(client, version, { identity: 'replyonce worker start-up' });
        return 'promoted';
      } catch (error) {
        // Another replica promoted it first, or the version's task queues are still registering.
        lastError = error;
        if (Date.now() > deadline) throw error;
      }
    }
    if (options.stopped?.()) throw new Error(`the worker stopped before ${versionLabel(version)} was made current`);
    if (Date.now() > deadline)
      throw new Error(
        `${versionLabel(version)} did not appear in the server's worker deployments in time${lastError ? ` (last answer: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)})` : ''}`,
      );
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

function timestamp(t: { seconds?: unknown; nanos?: number | null } | null | undefined): Date | null {
  if (!t?.seconds) return null;
  return new Date(Number(t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6));
}

function isNotFound(error: unknown): boolean {
  return (error as { code?: number } | null)?.code === 5; // gRPC NOT_FOUND
}

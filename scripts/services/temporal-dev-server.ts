// Runs `temporal server start-dev` (the CLI that scripts/setup.sh builds) as a child process.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { stopChild, waitForTemporalFrontend } from './temporal-process';
import { tail } from './log-tail';
import { SetupError } from './main';
import { LOOPBACK, assertPortFree, freePort } from './ports';
import { SEARCH_ATTRIBUTE_NAMES } from '../../contract';

/** The workflows' custom search attributes, registered at launch (and again by setupTemporal). */
export const SEARCH_ATTRIBUTES = SEARCH_ATTRIBUTE_NAMES;

/**
 * One partition per task queue: partitions spread a busy queue over matching hosts, but the dev
 * server is one host, where four partitions (the default) only add forwarding between them.
 */
const SINGLE_NODE_CONFIG = {
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
  'system.enableActivityEagerExecution': true,
};

/**
 * Worker Versioning (Worker Deployments; docs/changing-the-workflow.md). On by default in server
 * 1.29; named here so a server that turns them off is never what the workers meet.
 */
export const WORKER_VERSIONING_CONFIG = {
  'system.enableDeploymentVersions': true,
  'frontend.workerVersioningWorkflowAPIs': true,
};

/** A cold start takes 1–3 s; a large SQLite state file a little longer. */
const READY_TIMEOUT_MS = 60_000;
/** The server drains in 1–4 s on SIGTERM; past this it is killed. */
const STOP_GRACE_MS = 10_000;

export interface TemporalDevServerOptions {
  /** Frontend gRPC port; 0 picks a free one. */
  port: number;
  /** Web UI port, 0 for a free one, or null for no UI (--headless). */
  uiPort: number | null;
  /** SQLite file that keeps the state across restarts, or null to keep it in memory. */
  dbFilename: string | null;
  /** The server's output goes here (appended), and errors point at it. */
  logFile: string;
  /**
   * Let the history service catch up on its queues every 500 ms instead of every 30 s, so a
   * deleted execution is gone in a second or two (the test suite deletes some; dev need not).
   */
  fastQueues?: boolean;
  /** Namespaces to create at launch, so they are usable without waiting for propagation. */
  namespaces?: string[];
}

export interface TemporalDevServer {
  address: string;
  uiUrl?: string;
  pid: number;
  stop(): Promise<void>;
}

export function temporalCliPath(): string {
  const cache = process.env.REPLYONCE_CACHE || path.join(homedir(), '.cache', 'replyonce');
  return path.join(cache, 'bin', 'temporal');
}

export async function startTemporalDevServer(options: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const cli = temporalCliPath();
  if (!existsSync(cli)) throw new SetupError(`the Temporal CLI is missing at ${cli}; run scripts/setup.sh`);

  const hint = `Is another \`npm run dev\` (or a Temporal server) running? To use a server that already runs, set TEMPORAL_ADDRESS.`;
  const port = options.port === 0 ? await freePort() : await assertPortFree(options.port, 'Temporal', hint);
  const uiPort =
    options.uiPort === null
      ? null
      : options.uiPort === 0
        ? await freePort()
        : await assertPortFree(options.uiPort, 'Temporal Web UI', hint);
  const args = ['server', 'start-dev', '--ip', LOOPBACK, '--port', String(port), '--log-level', 'warn'];
  args.push(...(uiPort === null ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (options.dbFilename !== null) {
    mkdirSync(path.dirname(options.dbFilename), { recursive: true });
    args.push('--db-filename', options.dbFilename);
  }
  for (const name of SEARCH_ATTRIBUTES) args.push('--search-attribute', `${name}=Keyword`);
  if (options.fastQueues) {
    for (const key of ['history.transferProcessorUpdateAckInterval', 'history.visibilityProcessorUpdateAckInterval']) {
      args.push('--dynamic-config-value', `${key}="500ms"`);
    }
    // A version no longer current shows DRAINED within seconds of its last pinned run closing, not minutes.
    for (const key of [
      'matching.wv.VersionDrainageStatusRefreshInterval',
      'matching.wv.VersionDrainageStatusVisibilityGracePeriod',
    ]) {
      args.push('--dynamic-config-value', `${key}="2s"`);
    }
  }
  for (const [key, value] of Object.entries({ ...SINGLE_NODE_CONFIG, ...WORKER_VERSIONING_CONFIG }))
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  for (const namespace of options.namespaces ?? []) args.push('--namespace', namespace);

  mkdirSync(path.dirname(options.logFile), { recursive: true });
  const logFd = openSync(options.logFile, 'a');
  writeSync(logFd, `\n--- ${new Date().toISOString()} temporal ${args.join(' ')}\n`);
  // Its own process group: Ctrl-C in the terminal reaches the owner only, which stops the
  // server last, after the processes that use it.
  const child = spawn(cli, args, { stdio: ['ignore', logFd, logFd], detached: true });
  closeSync(logFd);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null)));
    child.once('error', (error) => {
      writeFileSync(options.logFile, `could not run ${cli}: ${error.message}\n`, { flag: 'a' });
      resolve(127);
    });
  });
  // An owner that crashes must not leave the server running (one killed with SIGKILL still can).
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  if (child.pid === undefined) {
    await exited;
    throw new SetupError(`could not start the Temporal CLI:\n${tail(options.logFile, 1)}`);
  }

  const stop = async () => {
    process.removeListener('exit', killOnExit);
    await stopChild(child, exited, STOP_GRACE_MS);
  };
  const address = `${LOOPBACK}:${port}`;
  try {
    await waitForTemporalFrontend({
      name: 'the Temporal dev server',
      connection: { address, connectTimeout: 1_000 },
      exited,
      logFile: options.logFile,
      timeoutMs: READY_TIMEOUT_MS,
      pollMs: 100,
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    address,
    ...(uiPort === null ? {} : { uiUrl: `http://localhost:${uiPort}` }),
    pid: child.pid,
    stop,
  };
}

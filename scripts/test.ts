// `npm test [-- [node --test options] [files…]]`, after scripts/setup.sh: the whole suite against
// one Temporal dev server (in memory, its Web UI on, free ports) and a fresh test database.
//
// The test files get TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE=replyonce-test, DATABASE_URL (the test
// database, migrated) and REPLYONCE_WORKFLOW_BUNDLE (the workflow code, bundled once).
// TEMPORAL_ADDRESS or DATABASE_URL, when set, point at servers to use instead of local ones.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../worker/create-worker';
import { workerBuildId } from '../worker/deployment';
import { loadTemporalConfig } from '../lib/config';
import { migrateDatabase } from './db-migrate';
import { setupTemporal } from './services/temporal-setup';
import { runMain, SetupError, messageOf } from './services/main';
import {
  databaseUrlFor,
  describeDatabaseUrl,
  ensureLocalPostgres,
  recreateDatabase,
  withClient,
} from './services/postgres';
import { startTemporalDevServer, type TemporalDevServer } from './services/temporal-dev-server';

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data', 'test');
const NAMESPACE = 'replyonce-test';
const DATABASE = 'replyonce_test';

type Cleanup = () => Promise<void>;

async function main(): Promise<number> {
  const { nodeOptions, files } = parseArgs(process.argv.slice(2));
  // One build id for the whole run (the commit when it started): a worker a test starts later is of
  // the same build as the runs it must serve, even if a commit lands meanwhile.
  process.env.WORKER_BUILD_ID ||= workerBuildId();
  mkdirSync(DATA, { recursive: true });
  const cleanups: Cleanup[] = [];
  let interrupted = false;
  let runner: ReturnType<typeof spawn> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n[test] ${signal}: stopping…`);
    runner?.kill(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const started = Date.now();
    const timings: string[] = [];
    const timed = async <T>(label: string, step: () => Promise<T>): Promise<T> => {
      const at = Date.now();
      const result = await step();
      timings.push(`${label} ${seconds(Date.now() - at)}`);
      return result;
    };
    // Independent steps run side by side; each registers its cleanup as soon as it holds something.
    const [temporal, databaseUrl, bundlePath] = await allOrCleanUp([
      timed('temporal', () => prepareTemporal(cleanups)),
      timed('postgres', () => prepareDatabase(cleanups)),
      timed('bundle', () => bundleWorkflows()),
    ]);
    console.error(`[test] set-up ${seconds(Date.now() - started)} (${timings.join(', ')})`);
    if (interrupted) return 130;

    const args = [
      '--import',
      'tsx',
      '--test',
      '--test-concurrency=1',
      TEST_TIMEOUT,
      ...defaultReporter(nodeOptions),
      ...nodeOptions,
      ...files,
    ];
    runner = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: 'inherit',
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: temporal.address,
        // The Web UI test drives a browser against it; absent when the suite uses a server of yours.
        ...(temporal.uiUrl ? { TEMPORAL_UI_URL: temporal.uiUrl } : {}),
        TEMPORAL_NAMESPACE: NAMESPACE,
        DATABASE_URL: databaseUrl,
        REPLYONCE_WORKFLOW_BUNDLE: bundlePath,
      },
    });
    const code = await new Promise<number>((resolve) => {
      runner?.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 130 : 1)));
      runner?.once('error', (error) => {
        console.error(`[test] could not start the test runner: ${error.message}`);
        resolve(1);
      });
    });
    return interrupted ? 130 : code;
  } finally {
    for (const cleanup of cleanups.reverse())
      await cleanup().catch((error: unknown) => console.error(`[test] clean-up: ${messageOf(error)}`));
  }

  /** Like Promise.all, but waits for every step, so nothing is left half-started when one fails. */
  async function allOrCleanUp<T extends unknown[]>(steps: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
    const results = await Promise.allSettled(steps);
    const failure = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failure) throw failure.reason;
    return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as T;
  }
}

/**
 * No single test may hang the suite: a broken guarantee often shows as a workflow that never
 * completes, and CI must fail with that test's name instead of running out of time.
 */
const TEST_TIMEOUT = '--test-timeout=180000';

async function prepareTemporal(cleanups: Cleanup[]): Promise<{ address: string; uiUrl?: string | undefined }> {
  let address = process.env.TEMPORAL_ADDRESS;
  let uiUrl: string | undefined;
  if (!address) {
    const server: TemporalDevServer = await startTemporalDevServer({
      port: 0,
      uiPort: 0, // the Web UI test looks at it the way an operator would
      fastQueues: true,
      dbFilename: null,
      logFile: path.join(DATA, 'temporal.log'),
      namespaces: [NAMESPACE], // created at launch: usable at once, no propagation wait
    });
    cleanups.push(() => server.stop());
    address = server.address;
    uiUrl = server.uiUrl;
  }
  // A server of yours is reached the way the processes reach it (Temporal's environment
  // configuration: TLS, mTLS, an API key); the suite's own dev server is plaintext.
  const connection = process.env.TEMPORAL_ADDRESS ? loadTemporalConfig().temporal : undefined;
  await setupTemporal({ address, connection, namespace: NAMESPACE, retentionDays: 7 });
  return { address, uiUrl };
}

/**
 * A fresh `replyonce_test`, migrated. Another suite running at the same time on this machine holds
 * an advisory lock on that name; this run then uses a database of its own, dropped at the end.
 */
async function prepareDatabase(cleanups: Cleanup[]): Promise<string> {
  const adminUrl = process.env.DATABASE_URL || (await ensureLocalPostgres()).adminUrl;
  const lock = await lockClient(adminUrl);
  cleanups.push(() => lock.end());
  const { rows } = await lock.query<{ locked: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [
    DATABASE,
  ]);
  let name = DATABASE;
  if (!rows[0]?.locked) {
    name = `${DATABASE}_${process.pid}`;
    console.error(`[test] another test run is using ${DATABASE}; this run uses ${name}`);
    cleanups.push(() =>
      withClient(adminUrl, (client) =>
        client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`),
      ).then(() => undefined),
    );
  }
  await recreateDatabase(adminUrl, name);
  const databaseUrl = databaseUrlFor(adminUrl, name);
  await migrateDatabase(databaseUrl, { log: () => undefined });
  return databaseUrl;
}

/**
 * The connection that holds the suite's advisory lock. Advisory locks belong to one database, so two
 * runs whose DATABASE_URL names different databases of one cluster (one left pointing at an eval
 * database) would both get the lock and drop each other's `replyonce_test`: the lock is taken in
 * the cluster's `postgres` database, and in the given one only where that cannot be reached.
 */
async function lockClient(adminUrl: string): Promise<Client> {
  const connect = async (url: string) => {
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
  };
  try {
    return await connect(databaseUrlFor(adminUrl, 'postgres'));
  } catch {
    // A server where this role may not connect to `postgres`: the given database's lock, as before.
  }
  try {
    return await connect(adminUrl);
  } catch (error) {
    throw new SetupError(`cannot connect to PostgreSQL at ${describeDatabaseUrl(adminUrl)}: ${messageOf(error)}`);
  }
}

/** Bundled once for the whole suite; written atomically, since another run may be reading it. */
async function bundleWorkflows(): Promise<string> {
  const file = path.join(DATA, 'workflow-bundle.js');
  let code: string;
  try {
    ({ code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../workflows'),
      // The workers' own interceptors (how each run ended, for /metrics), as a worker bundles them.
      workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
      logger: new DefaultLogger('WARN'),
    }));
  } catch (error) {
    throw new SetupError(`bundling workflows/ failed: ${messageOf(error)}`);
  }
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, code);
  renameSync(partial, file);
  return file;
}

/** Options for `node --test` come first, files after; no files means test/**\/*.test.ts. */
function parseArgs(args: string[]): { nodeOptions: string[]; files: string[] } {
  const nodeOptions = args.filter((arg) => arg.startsWith('-'));
  const given = args.filter((arg) => !arg.startsWith('-'));
  const files = given.length > 0 ? given.map((file) => path.resolve(file)) : findTests(path.join(ROOT, 'test'));
  if (files.length === 0) throw new SetupError('no test files found (test/**/*.test.ts)');
  return { nodeOptions, files };
}

function findTests(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.test.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
}

/** Node 20 prints TAP when stdout is not a terminal (CI); the spec reporter reads better there too. */
function defaultReporter(nodeOptions: string[]): string[] {
  return nodeOptions.some((option) => option.startsWith('--test-reporter')) ? [] : ['--test-reporter=spec'];
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

if (require.main === module) {
  runMain(main);
}

import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../../worker/create-worker';
import { Client } from 'pg';
import { baselineSchemaSql } from '../baseline/app';
import { migrateDatabase } from '../../scripts/db-migrate';
import { compileApp as compile } from '../../scripts/services/compile';
import { setupTemporal } from '../../scripts/services/temporal-setup';
import { databaseUrlFor, ensureLocalPostgres, recreateDatabase, withClient } from '../../scripts/services/postgres';
import { startTemporalDevServer } from '../../scripts/services/temporal-dev-server';
import { startTemporalStack } from '../../scripts/services/temporal-stack';

/**
 * The services a bench run needs, started the way scripts/test.ts starts them for the suite:
 * a Temporal dev server (in memory) with the bench's namespace, a fresh `replyonce_bench`
 * database on the project's Postgres (migrated, plus the baseline's table), the workflow code
 * bundled once, and the app compiled to JavaScript. TEMPORAL_ADDRESS / DATABASE_URL, when set,
 * point at servers to use instead.
 */

export const ROOT = path.resolve(__dirname, '..', '..');
export const DATA = path.join(ROOT, '.data', 'bench');
export const NAMESPACE = 'replyonce-bench';
export const DATABASE = 'replyonce_bench';
/** Held for the whole run, so two benches never share (and drop) one database. */
const BENCH_LOCK_KEY = '7306086941427000617';

export type Cleanup = () => Promise<void>;

export interface Environment {
  temporalAddress: string;
  /** Temporal's connection variables for the servers the bench starts (envconfig: mTLS on the stack). */
  temporalEnv: Record<string, string>;
  databaseUrl: string;
  workflowBundle: string;
  /** Where the compiled app lives (runtime dist), or the repository root (runtime tsx). */
  codeRoot: string;
  tsx: boolean;
  temporalPid: number | undefined;
  /** Matches the Postgres backends of Temporal's own databases (the stack), for CPU accounting. */
  temporalPostgres?: string | undefined;
  /** Replaces the Temporal dev server with a fresh one and points this environment at it. */
  freshTemporal(): Promise<void>;
}

export interface TemporalService {
  address: string;
  /** Temporal's connection variables (TEMPORAL_ADDRESS, and the TLS ones on the stack). */
  env: Record<string, string>;
  pid: number | undefined;
  /** See Environment.temporalPostgres. */
  postgresMatch?: string | undefined;
  /**
   * A fresh dev server (in memory) in place of this one, or nothing when TEMPORAL_ADDRESS names a
   * server of yours. Each ours run leaves its unfinished workflows behind on a task queue nobody
   * polls; thousands of them (the 16× runs) slow the dev server down for every later run, so the
   * bench starts from a clean server for each repeat and for the end-to-end scenario.
   */
  restart(): Promise<void>;
}

export async function prepareTemporal(cleanups: Cleanup[], kind: 'dev' | 'stack' = 'dev'): Promise<TemporalService> {
  const external = process.env.TEMPORAL_ADDRESS;
  if (external) {
    await setupTemporal({ address: external, namespace: NAMESPACE, retentionDays: 7 });
    const env = { TEMPORAL_ADDRESS: external };
    return { address: external, env, pid: undefined, restart: async () => undefined };
  }
  if (kind === 'stack') {
    const stack = await startTemporalStack({
      dataDir: path.join(DATA, 'stack'),
      // Not `bench`: replyonce_bench is the bench's own database (prepareDatabase), made in parallel.
      name: 'benchstack',
      fresh: true,
      uiPort: null,
      namespace: NAMESPACE,
      log: (line) => console.error(`[bench] ${line}`),
    });
    cleanups.push(() => stack.stop());
    const { TEMPORAL_NAMESPACE: _namespace, ...env } = stack.clientEnv;
    return {
      address: stack.address,
      env,
      get pid() {
        return stack.serverPid;
      },
      // `temporal_benchstack` and `temporal_benchstack_visibility` (a backend's title names its database).
      postgresMatch: ` ${stack.temporalDatabases[0]}`,
      restart: async () => undefined,
    };
  }
  const start = async () => {
    const server = await startTemporalDevServer({
      port: 0,
      uiPort: null,
      dbFilename: null,
      logFile: path.join(DATA, 'temporal.log'),
      namespaces: [NAMESPACE],
    });
    await setupTemporal({ address: server.address, namespace: NAMESPACE, retentionDays: 7 });
    return server;
  };
  let server = await start();
  cleanups.push(() => server.stop());
  const service: TemporalService = {
    address: server.address,
    env: { TEMPORAL_ADDRESS: server.address },
    pid: server.pid,
    restart: async () => {
      await server.stop();
      server = await start();
      service.address = server.address;
      service.env = { TEMPORAL_ADDRESS: server.address };
      service.pid = server.pid;
    },
  };
  return service;
}

/** The environment the servers under test run in, on one Temporal (its restart keeps it pointed right). */
export function environmentOn(
  temporal: TemporalService,
  app: Pick<Environment, 'databaseUrl' | 'workflowBundle' | 'codeRoot' | 'tsx'>,
): Environment {
  const env: Environment = {
    ...app,
    temporalAddress: temporal.address,
    temporalEnv: temporal.env,
    temporalPid: temporal.pid,
    temporalPostgres: temporal.postgresMatch,
    freshTemporal: async () => {
      await temporal.restart();
      env.temporalAddress = temporal.address;
      env.temporalEnv = temporal.env;
      env.temporalPid = temporal.pid;
    },
  };
  return env;
}

export async function prepareDatabase(cleanups: Cleanup[], log: (line: string) => void): Promise<string> {
  const adminUrl = process.env.DATABASE_URL || (await ensureLocalPostgres()).adminUrl;
  const lock = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  await lock.connect();
  cleanups.push(() => lock.end());
  const { rows } = await lock.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [BENCH_LOCK_KEY]);
  if (!rows[0]?.locked) {
    // Two benches on one machine would measure each other: this one waits its turn (Ctrl-C stops it).
    log(`another bench holds the ${DATABASE} database on this server; waiting for it to finish`);
    await lock.query('SELECT pg_advisory_lock($1)', [BENCH_LOCK_KEY]);
    log('the other bench has finished; going on');
  }
  await recreateDatabase(adminUrl, DATABASE);
  const url = databaseUrlFor(adminUrl, DATABASE);
  await migrateDatabase(url, { log: () => undefined });
  await withClient(url, (client) => client.query(baselineSchemaSql));
  return url;
}

export async function bundleWorkflows(): Promise<string> {
  const file = path.join(DATA, 'workflow-bundle.js');
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../workflows'),
    workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
    logger: new DefaultLogger('WARN'),
  });
  mkdirSync(DATA, { recursive: true });
  writeFileSync(`${file}.tmp`, code);
  renameSync(`${file}.tmp`, file);
  return file;
}

/** Compiles the app and the baseline with the project's tsc into .data/bench/dist (not dist/, which others use). */
export function compileApp(): Promise<string> {
  return compile({
    project: path.join(ROOT, 'bench', 'tsconfig.build.json'),
    outDir: path.join(DATA, 'dist'),
    log: (line) => console.error(`[bench] ${line}`),
  });
}

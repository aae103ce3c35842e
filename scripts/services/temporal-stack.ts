// The production topology's infrastructure on this machine, without Docker: Postgres with separate
// roles and databases for Temporal and for the app, Temporal's schemas set up and upgraded by its
// schema tool, Temporal's own server with mTLS on its frontend, and the Web UI server connected with
// a certificate of its own. The configuration files are deploy/'s, the ones docker-compose.yml mounts.
// `npm run stack` adds the app's processes; test/production-topology.test.ts runs its tests on it.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadTemporalConnection, type TemporalConnectionSettings } from '../../lib/temporal-connection';
import { setupTemporal } from './temporal-setup';
import { SetupError, sleep } from './main';
import { LOOPBACK, freePort, isPortFree } from './ports';
import { LOCAL_POSTGRES, dropDatabasesAsSuperuser, runSqlFileAsSuperuser } from './postgres';
import { ensureTemporalBinaries, type TemporalBinaries } from './temporal-binaries';
import { stopChild, waitForTemporalFrontend } from './temporal-process';
import { tail } from './log-tail';

const ROOT = path.resolve(__dirname, '..', '..');
const DEPLOY = path.join(ROOT, 'deploy');
const run = promisify(execFile);

/**
 * The local cluster's role passwords. Loopback only and the same for every local stack: roles are
 * global to the cluster, so a stack and a test run side by side must agree on them.
 */
const TEMPORAL_DB_PASSWORD = 'temporal-local';
const APP_DB_PASSWORD = 'replyonce-app-local';
/** A cold server creates its system namespace and starts its system workers in a few seconds. */
const READY_TIMEOUT_MS = 90_000;
const STOP_GRACE_MS = 15_000;

export interface TemporalStackOptions {
  /** Certificates, logs: e.g. .data/stack (git-ignored). */
  dataDir: string;
  /** Database names: `temporal_<name>`, `temporal_<name>_visibility`, `replyonce_<name>`. */
  name: string;
  /** Drop the databases first (tests): a fresh cluster each run. */
  fresh?: boolean;
  /** The frontend's gRPC port (0: a free one). */
  frontendPort?: number;
  /** The Web UI's port (0: a free one; null: no UI). */
  uiPort?: number | null;
  namespace?: string;
  log?: (line: string) => void;
}

export interface TemporalStack {
  /** host:port of the frontend (mTLS). */
  address: string;
  namespace: string;
  uiUrl?: string | undefined;
  certsDir: string;
  /** Temporal's connection variables for a replyonce process (envconfig; mTLS with client.pem). */
  clientEnv: Record<string, string>;
  connection: TemporalConnectionSettings;
  /** The app's database, owned by its own role (replyonce_app), not Temporal's. */
  appDatabaseUrl: string;
  binaries: TemporalBinaries;
  /** The Temporal server's process id (a new one after restartServer). */
  readonly serverPid: number | undefined;
  /** Temporal's own databases (persistence, visibility), e.g. to count their Postgres backends. */
  temporalDatabases: string[];
  /** Stops the server (and starts it again on the same state): for restart tests and the soak. */
  restartServer(): Promise<void>;
  stop(): Promise<void>;
}

interface Child {
  child: ChildProcess;
  exited: Promise<number | null>;
}

export async function startTemporalStack(options: TemporalStackOptions): Promise<TemporalStack> {
  const log = options.log ?? ((line: string) => console.error(`[stack] ${line}`));
  const namespace = options.namespace ?? 'replyonce';
  const databases = {
    temporal: `temporal_${options.name}`,
    visibility: `temporal_${options.name}_visibility`,
    app: `replyonce_${options.name}`,
  };
  const certsDir = path.join(options.dataDir, 'certs');
  const logDir = path.join(options.dataDir, 'logs');
  mkdirSync(logDir, { recursive: true });

  const binaries = await ensureTemporalBinaries((line) => log(line));
  await run('sh', [path.join(DEPLOY, 'tls', 'generate-certs.sh'), certsDir]);

  if (options.fresh) await dropDatabasesAsSuperuser(Object.values(databases));
  await runSqlFileAsSuperuser(path.join(DEPLOY, 'postgres', 'create-roles.sql'), {
    temporal_password: TEMPORAL_DB_PASSWORD,
    app_password: APP_DB_PASSWORD,
    temporal_db: databases.temporal,
    visibility_db: databases.visibility,
    app_db: databases.app,
  });
  const schemaStarted = Date.now();
  await runLogged(
    'sh',
    [path.join(DEPLOY, 'temporal', 'setup-schema.sh')],
    {
      SQL_HOST: LOCAL_POSTGRES.host,
      SQL_PORT: String(LOCAL_POSTGRES.port),
      SQL_USER: 'temporal',
      SQL_PASSWORD: TEMPORAL_DB_PASSWORD,
      TEMPORAL_DB: databases.temporal,
      TEMPORAL_VISIBILITY_DB: databases.visibility,
      SCHEMA_DIR: binaries.postgresSchemaDir,
      SQL_TOOL: binaries.sqlTool,
    },
    path.join(logDir, 'schema.log'),
  );
  log(`schemas of ${databases.temporal} and ${databases.visibility} up to date (${Date.now() - schemaStarted} ms)`);

  // Temporal stores membership ports as smallint: every port of the server stays under 32768,
  // below Linux's ephemeral range where freePort() would land.
  const low = () => freeLowPort();
  const ports = {
    frontend: options.frontendPort || (await low()),
    frontendHttp: await low(),
    frontendMembership: await low(),
    history: await low(),
    historyMembership: await low(),
    matching: await low(),
    matchingMembership: await low(),
    worker: await low(),
    workerMembership: await low(),
    metrics: await low(),
  };
  const address = `${LOOPBACK}:${ports.frontend}`;
  const serverEnv = {
    TEMPORAL_TLS_DIR: certsDir,
    TEMPORAL_BIND_ON_IP: LOOPBACK,
    TEMPORAL_BROADCAST_ADDRESS: LOOPBACK,
    TEMPORAL_DB_HOST: LOCAL_POSTGRES.host,
    TEMPORAL_DB_PORT: String(LOCAL_POSTGRES.port),
    TEMPORAL_DB_USER: 'temporal',
    TEMPORAL_DB_PASSWORD,
    TEMPORAL_DB: databases.temporal,
    TEMPORAL_VISIBILITY_DB: databases.visibility,
    TEMPORAL_FRONTEND_GRPC_PORT: String(ports.frontend),
    TEMPORAL_FRONTEND_HTTP_PORT: String(ports.frontendHttp),
    TEMPORAL_FRONTEND_MEMBERSHIP_PORT: String(ports.frontendMembership),
    TEMPORAL_HISTORY_GRPC_PORT: String(ports.history),
    TEMPORAL_HISTORY_MEMBERSHIP_PORT: String(ports.historyMembership),
    TEMPORAL_MATCHING_GRPC_PORT: String(ports.matching),
    TEMPORAL_MATCHING_MEMBERSHIP_PORT: String(ports.matchingMembership),
    TEMPORAL_WORKER_GRPC_PORT: String(ports.worker),
    TEMPORAL_WORKER_MEMBERSHIP_PORT: String(ports.workerMembership),
    TEMPORAL_METRICS_ADDRESS: `${LOOPBACK}:${ports.metrics}`,
    TEMPORAL_DYNAMIC_CONFIG_FILE: path.join(DEPLOY, 'temporal-dynamicconfig', 'replyonce.yaml'),
  };
  const clientEnv: Record<string, string> = {
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: namespace,
    TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(certsDir, 'client.pem'),
    TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(certsDir, 'client.key'),
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(certsDir, 'ca.pem'),
    // The server's certificate names `temporal` (the compose service) as well as 127.0.0.1; SNI takes a name.
    TEMPORAL_TLS_SERVER_NAME: 'temporal',
  };
  const loaded = loadTemporalConnection(clientEnv);
  if (!loaded.ok) throw new SetupError(`the stack's client configuration is invalid: ${loaded.problems.join('; ')}`);
  const connection = loaded.settings;

  const serverLog = path.join(logDir, 'temporal-server.log');
  const startServer = async (): Promise<Child> => {
    const t0 = Date.now();
    const server = spawnLogged(
      binaries.server,
      // No authorizer: mTLS decides who may connect at all (every client certificate of the CA is trusted alike).
      ['--root', ROOT, '--config', 'deploy/temporal', '--env', 'replyonce', '--allow-no-auth', 'start'],
      serverEnv,
      serverLog,
    );
    await waitForTemporalFrontend({
      name: 'the Temporal server',
      connection: { ...connection.connectionOptions, address: connection.address, connectTimeout: 2_000 },
      exited: server.exited,
      logFile: serverLog,
      timeoutMs: READY_TIMEOUT_MS,
      pollMs: 250,
      namespace: 'temporal-system',
    });
    log(`Temporal server ${address} (mTLS) serving after ${Date.now() - t0} ms; log ${serverLog}`);
    return server;
  };
  let server = await startServer();
  const children: Child[] = [];
  const stop = async () => {
    for (const child of [...children].reverse()) await stopChild(child.child, child.exited, STOP_GRACE_MS);
    await stopChild(server.child, server.exited, STOP_GRACE_MS);
  };
  try {
    await setupTemporal({ connection, namespace, retentionDays: 7, connectTimeoutMs: 10_000 });

    let uiUrl: string | undefined;
    if (options.uiPort !== null) {
      const uiPort = options.uiPort || (await freePort());
      uiUrl = `http://${LOOPBACK}:${uiPort}`;
      const uiLog = path.join(logDir, 'temporal-ui.log');
      const ui = spawnLogged(
        binaries.uiServer,
        ['--root', DEPLOY, '--config', 'temporal-ui', '--env', 'replyonce', 'start'],
        {
          TEMPORAL_UI_TLS_DIR: certsDir,
          TEMPORAL_UI_TEMPORAL_ADDRESS: address,
          TEMPORAL_UI_HOST: LOOPBACK,
          TEMPORAL_UI_PORT: String(uiPort),
          TEMPORAL_UI_DEFAULT_NAMESPACE: namespace,
          TEMPORAL_UI_PUBLIC_URL: uiUrl,
          TEMPORAL_UI_COOKIE_INSECURE: 'true', // plain http on loopback
        },
        uiLog,
      );
      children.push(ui);
      await waitForHttp(`${uiUrl}/api/v1/settings`, ui, uiLog);
      log(`Web UI ${uiUrl} (its own client certificate); log ${uiLog}`);
    }

    return {
      address,
      namespace,
      uiUrl,
      certsDir,
      clientEnv,
      connection,
      appDatabaseUrl: `postgres://replyonce_app:${APP_DB_PASSWORD}@${LOCAL_POSTGRES.host}:${LOCAL_POSTGRES.port}/${databases.app}`,
      binaries,
      get serverPid() {
        return server.child.pid;
      },
      temporalDatabases: [databases.temporal, databases.visibility],
      async restartServer() {
        await stopChild(server.child, server.exited, STOP_GRACE_MS);
        server = await startServer();
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

const taken = new Set<number>();
/** A free loopback port in 20000–32767, not handed out before by this process. */
async function freeLowPort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_767);
    if (taken.has(port) || !(await isPortFree(port))) continue;
    taken.add(port);
    return port;
  }
  throw new SetupError('no free port between 20000 and 32767 on 127.0.0.1');
}

function spawnLogged(file: string, args: string[], env: Record<string, string>, logFile: string): Child {
  const fd = openSync(logFile, 'a');
  writeSync(fd, `\n--- ${new Date().toISOString()} ${path.basename(file)} ${args.join(' ')}\n`);
  // Its own process group: Ctrl-C reaches the owner, which stops the server after the app.
  const child = spawn(file, args, {
    stdio: ['ignore', fd, fd],
    env: { PATH: process.env.PATH, ...env },
    detached: true,
  });
  closeSync(fd);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null)));
    child.once('error', () => resolve(127));
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.removeListener('exit', killOnExit));
  return { child, exited };
}

async function runLogged(file: string, args: string[], env: Record<string, string>, logFile: string): Promise<void> {
  const child = spawnLogged(file, args, env, logFile);
  const code = await child.exited;
  if (code !== 0) throw new SetupError(`${path.basename(args[0] ?? file)} failed (exit ${code}):\n${tail(logFile)}`);
}

async function waitForHttp(url: string, child: Child, logFile: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let exitCode: number | null | undefined;
  void child.exited.then((code) => (exitCode = code));
  while (Date.now() < deadline) {
    if (exitCode !== undefined) throw new SetupError(`the Web UI server exited (code ${exitCode}):\n${tail(logFile)}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new SetupError(`the Web UI server did not answer at ${url} within 30 s; see ${logFile}`);
}

// A PostgreSQL cluster of this project's own, run with Debian's postgresql-common tools
// (pg_createcluster, pg_ctlcluster): loopback only, on a port of its own so it never meets a
// system cluster on 5432. The server refuses to run as root; the tools run it as `postgres`.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { describeDatabaseUrl } from '../../lib/db';

export { describeDatabaseUrl };

const exec = promisify(execFile);

const CLUSTER = 'replyonce';
const PORT = 55432;
const ROLE = 'replyonce';
const PASSWORD = 'replyonce';
/** The major version created when no `replyonce` cluster exists yet: Debian 12's `postgresql`. */
const PREFERRED_MAJOR = '15';
/** A stopped cluster starts in about a second; this leaves room for crash recovery. */
const START_TIMEOUT_MS = 30_000;

export const LOCAL_ADMIN_URL = `postgres://${ROLE}:${PASSWORD}@127.0.0.1:${PORT}/postgres`;
export const DEFAULT_DEV_DATABASE_URL = `postgres://${ROLE}:${PASSWORD}@127.0.0.1:${PORT}/replyonce`;

interface Cluster {
  version: string;
  name: string;
  port: number;
  online: boolean;
  dataDir: string;
  logFile: string;
}

/**
 * Makes sure the project's cluster exists, runs, and has the `replyonce` role (LOGIN, CREATEDB).
 * Fast when it is already up: one successful connection and nothing else.
 */
export async function ensureLocalPostgres(): Promise<{ adminUrl: string }> {
  if ((await connectionError(LOCAL_ADMIN_URL)) === undefined) return { adminUrl: LOCAL_ADMIN_URL };

  let cluster = await findCluster();
  if (!cluster) {
    log(`creating the PostgreSQL cluster "${CLUSTER}" on 127.0.0.1:${PORT}…`);
    cluster = await createCluster();
  }
  if (cluster.port !== PORT) {
    throw new Error(
      `the PostgreSQL cluster "${CLUSTER}" listens on port ${cluster.port}, not ${PORT}. Fix it with:\n` +
        `  pg_conftool ${cluster.version} ${CLUSTER} set port ${PORT} && pg_ctlcluster ${cluster.version} ${CLUSTER} restart`,
    );
  }
  if (!isRunning(cluster)) {
    writeConfig(cluster);
    log(`starting the PostgreSQL cluster "${CLUSTER}" (${cluster.version})…`);
    await startCluster(cluster);
  }
  await ensureRole(cluster);

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const error = await connectionError(LOCAL_ADMIN_URL);
    if (error === undefined) return { adminUrl: LOCAL_ADMIN_URL };
    if (Date.now() > deadline) {
      throw new Error(
        `PostgreSQL on 127.0.0.1:${PORT} does not accept connections (${error.message}); see ${cluster.logFile}`,
      );
    }
    await sleep(200);
  }
}

/** Creates the database when it is missing; leaves an existing one alone. */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  await withClient(adminUrl, async (client) => {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return;
    try {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
    } catch (error) {
      if (pgCode(error) !== DUPLICATE_DATABASE) throw error; // a concurrent start created it first
    }
  });
}

/** Drops the database (disconnecting its sessions) and creates it empty. For tests. */
export async function recreateDatabase(adminUrl: string, name: string): Promise<void> {
  await withClient(adminUrl, async (client) => {
    const database = client.escapeIdentifier(name);
    await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${database}`);
  });
}

/** The same server and credentials, another database. */
export function databaseUrlFor(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

export async function withClient<T>(url: string, use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`cannot connect to PostgreSQL at ${describeDatabaseUrl(url)}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

const DUPLICATE_DATABASE = '42P04';

function pgCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
}

async function connectionError(url: string): Promise<Error | undefined> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function findCluster(): Promise<Cluster | undefined> {
  const { stdout } = await tool('pg_lsclusters', ['--no-header']);
  // Ver Cluster Port Status Owner Data-directory Log-file
  const clusters = stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1] === CLUSTER)
    .map(([version = '', name = '', port = '', status = '', , dataDir = '', logFile = '']) => ({
      version,
      name,
      port: Number(port),
      online: status.startsWith('online'),
      dataDir,
      logFile,
    }));
  return clusters.find((c) => c.version === PREFERRED_MAJOR) ?? clusters.at(-1);
}

async function createCluster(): Promise<Cluster> {
  const version = installedMajor();
  await tool('pg_createcluster', [
    '--port',
    String(PORT),
    version,
    CLUSTER,
    '--',
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
  ]);
  const cluster = await findCluster();
  if (!cluster) throw new Error(`pg_createcluster ${version} ${CLUSTER} succeeded, but pg_lsclusters does not list it`);
  return cluster;
}

/**
 * Loopback only. A drop-in under conf.d/ (which Debian's postgresql.conf includes), because
 * pg_createcluster --pgoption and pg_conftool do not quote an IP address correctly.
 */
function writeConfig(cluster: Cluster): void {
  const file = `/etc/postgresql/${cluster.version}/${CLUSTER}/conf.d/replyonce.conf`;
  // Connections: each app process holds a pool of 10, a test run several processes, the production
  // stack a Temporal server with pools of its own; Postgres's default of 100 runs out with two
  // suites side by side ("sorry, too many clients already").
  const content =
    "# Written by replyonce's scripts/services/postgres.ts\nlisten_addresses = '127.0.0.1'\nmax_connections = 500\n";
  if (existsSync(file) && readFileSync(file, 'utf8') === content) return;
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content, { mode: 0o644 });
}

function installedMajor(): string {
  if (existsSync(`/usr/lib/postgresql/${PREFERRED_MAJOR}/bin/postgres`)) return PREFERRED_MAJOR;
  const majors = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql').filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/postgres`))
    : [];
  const newest = majors.sort((a, b) => Number(a) - Number(b)).at(-1);
  if (!newest) throw new Error('no PostgreSQL server is installed; run scripts/setup.sh, or set DATABASE_URL');
  return newest;
}

/**
 * Running means: postmaster.pid names a live process that is this cluster's postgres. After a
 * machine restart the pid file can name an unrelated process (or another cluster's postgres),
 * which pg_lsclusters may still report as online.
 */
function isRunning(cluster: Cluster): boolean {
  const pid = postmasterPid(cluster);
  if (pid === undefined) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes(cluster.dataDir) || cmdline.some((arg) => arg.includes(`/${cluster.version}/${CLUSTER}/`));
  } catch {
    return false;
  }
}

function postmasterPid(cluster: Cluster): number | undefined {
  try {
    const pid = Number(readFileSync(`${cluster.dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function startCluster(cluster: Cluster): Promise<void> {
  // The pid file of a server that did not stop cleanly: postgres would refuse to start if its
  // pid now belongs to another live process.
  if (postmasterPid(cluster) !== undefined) {
    log(`removing the stale pid file of "${CLUSTER}"`);
    rmSync(`${cluster.dataDir}/postmaster.pid`, { force: true });
  }
  try {
    await tool('pg_ctlcluster', [cluster.version, CLUSTER, 'start']);
  } catch (error) {
    throw new Error(`${messageOf(error)}\n  see ${cluster.logFile}`, { cause: error });
  }
}

/** Creates or repairs the role over the Unix socket, as the cluster's superuser. */
async function ensureRole(cluster: Cluster): Promise<void> {
  const sql = `DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${ROLE}') THEN
      CREATE ROLE ${ROLE} LOGIN CREATEDB PASSWORD '${PASSWORD}';
    ELSE
      ALTER ROLE ${ROLE} LOGIN CREATEDB PASSWORD '${PASSWORD}';
    END IF;
  END $$;`;
  await psqlAsSuperuser(cluster, ['-c', sql]);
}

/** psql over the Unix socket as the cluster's superuser (the server trusts local connections). */
async function psqlAsSuperuser(cluster: Cluster, args: string[], stdin?: string): Promise<void> {
  const psql = `/usr/lib/postgresql/${cluster.version}/bin/psql`;
  const common = [
    '-X',
    '-q',
    '-v',
    'ON_ERROR_STOP=1',
    '-h',
    '/var/run/postgresql',
    '-p',
    String(PORT),
    '-d',
    'postgres',
  ];
  if (process.getuid?.() === 0) {
    await tool('runuser', ['-u', 'postgres', '--', psql, ...common, ...args], stdin);
  } else {
    await tool(psql, ['-U', 'postgres', ...common, ...args], stdin);
  }
}

/**
 * Runs a SQL file as the local cluster's superuser, with psql variables: what only a superuser may
 * do, such as creating the production stack's separate roles (deploy/postgres/create-roles.sql).
 */
export async function runSqlFileAsSuperuser(file: string, variables: Record<string, string>): Promise<void> {
  await ensureLocalPostgres();
  const cluster = await findCluster();
  if (!cluster) throw new Error(`the PostgreSQL cluster "${CLUSTER}" is missing`);
  const vars = Object.entries(variables).flatMap(([name, value]) => ['-v', `${name}=${value}`]);
  // On standard input, not `-f file`: psql runs as the `postgres` user, who may not be allowed into
  // the checkout (a clone in a private temporary folder, a home directory of mode 700).
  await psqlAsSuperuser(cluster, vars, readFileSync(file, 'utf8'));
}

/**
 * Restarts the local cluster (fast shutdown: every session is cut, as in a crash or a failover),
 * for the soak. Everything else using the cluster at that moment loses its connections too.
 */
export async function restartLocalPostgres(): Promise<void> {
  const cluster = await findCluster();
  if (!cluster) throw new Error(`the PostgreSQL cluster "${CLUSTER}" is missing`);
  await tool('pg_ctlcluster', [cluster.version, CLUSTER, 'restart', '-m', 'fast']);
  await ensureLocalPostgres();
}

/** Drops databases (disconnecting their sessions) as the local cluster's superuser: whoever owns them. */
export async function dropDatabasesAsSuperuser(names: string[]): Promise<void> {
  await ensureLocalPostgres();
  const cluster = await findCluster();
  if (!cluster) throw new Error(`the PostgreSQL cluster "${CLUSTER}" is missing`);
  for (const name of names) {
    await psqlAsSuperuser(cluster, ['-c', `DROP DATABASE IF EXISTS "${name.replaceAll('"', '""')}" WITH (FORCE)`]);
  }
}

export const LOCAL_POSTGRES = { host: '127.0.0.1', port: PORT } as const;

async function tool(file: string, args: string[], stdin?: string): Promise<{ stdout: string; stderr: string }> {
  try {
    // From `/`: a tool run as `postgres` cannot always enter the working directory.
    const running = exec(file, args, { encoding: 'utf8', cwd: '/' });
    running.child.stdin?.end(stdin ?? '');
    return await running;
  } catch (error) {
    const detail =
      typeof error === 'object' && error !== null && 'code' in error && error.code === 'ENOENT'
        ? 'not found; run scripts/setup.sh (it installs PostgreSQL), or set DATABASE_URL'
        : `${errorOutput(error)}`;
    const hint =
      process.getuid?.() === 0 ? '' : '\n  (the local cluster is managed as root; run as root, or set DATABASE_URL)';
    throw new Error(`${file} ${args.slice(0, 3).join(' ')}…: ${detail}${hint}`, { cause: error });
  }
}

function errorOutput(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'stderr' in error && String(error.stderr).trim()) {
    return String(error.stderr).trim();
  }
  return messageOf(error);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function log(message: string): void {
  console.error(`[postgres] ${message}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

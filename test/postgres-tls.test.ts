import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from 'pg';
import { createDb } from '../lib/db';
import { migrateDatabase } from '../scripts/db-migrate';
import { freePort } from '../scripts/services/ports';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';

// Issue 18 point 13: the processes accept a DATABASE_URL with sslmode=verify-full. A Postgres of
// the test's own (initdb in a temporary directory, run as the `postgres` user) takes TCP
// connections over TLS only, with a certificate of a CA this test generates; the migrations, the
// API and the worker connect to it, and a wrong CA or a wrong host name is refused.
const PASSWORD = 'tls-test-password';
let dir: string;
let port: number;
let server: ChildProcess;
let h: Harness;

const asPostgres = (command: string, args: string[]) =>
  execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' });

function certificates(): void {
  const ssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  for (const ca of ['ca', 'other-ca'])
    ssl(
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2'].concat([
        '-subj',
        `/CN=test ${ca}`,
        '-keyout',
        `${ca}.key`,
        '-out',
        `${ca}.pem`,
      ]),
    );
  ssl(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=localhost'].concat([
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
    ]),
  );
  writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n');
  ssl(
    ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2'].concat([
      '-extfile',
      'server.ext',
      '-out',
      'server.pem',
    ]),
  );
  chmodSync(path.join(dir, 'server.key'), 0o600);
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'replyonce-pg-tls-'));
  chmodSync(dir, 0o755);
  certificates();
  const pgUser = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const pgGroup = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  for (const file of ['server.key', 'server.pem']) chownSync(path.join(dir, file), pgUser, pgGroup);
  writeFileSync(path.join(dir, 'pw'), PASSWORD);
  chownSync(path.join(dir, 'pw'), pgUser, pgGroup);
  for (const sub of ['data', 'socket']) {
    execFileSync('mkdir', ['-p', path.join(dir, sub)]);
    chownSync(path.join(dir, sub), pgUser, pgGroup);
  }
  asPostgres(
    'initdb',
    ['-D', path.join(dir, 'data'), '-U', 'postgres', '--pwfile', path.join(dir, 'pw')].concat([
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
    ]),
  );
  // TCP over TLS only: a plaintext connection finds no line of pg_hba.conf that lets it in.
  writeFileSync(
    path.join(dir, 'data', 'pg_hba.conf'),
    'local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all 0.0.0.0/0 reject\n',
  );
  port = await freePort();
  server = spawn(
    'runuser',
    [
      '-u',
      'postgres',
      '--',
      'postgres',
      '-D',
      path.join(dir, 'data'),
      '-p',
      String(port),
      '-k',
      path.join(dir, 'socket'),
    ]
      .concat(['-c', 'listen_addresses=127.0.0.1', '-c', 'ssl=on'])
      .concat([
        '-c',
        `ssl_cert_file=${path.join(dir, 'server.pem')}`,
        '-c',
        `ssl_key_file=${path.join(dir, 'server.key')}`,
      ]),
    { stdio: 'ignore' },
  );
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      asPostgres('pg_isready', ['-h', '127.0.0.1', '-p', String(port)]);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error('the TLS Postgres did not start');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  asPostgres('psql', [
    '-h',
    path.join(dir, 'socket'),
    '-p',
    String(port),
    '-U',
    'postgres',
    '-c',
    'CREATE DATABASE replyonce_tls',
  ]);
  h = await Harness.start({ worker: false });
});
after(async () => {
  await h?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    // runuser does not pass a signal on to the server: pg_ctl stops it.
    asPostgres('pg_ctl', ['-D', path.join(dir, 'data'), '-m', 'fast', '-w', 'stop']);
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  }
  rmSync(dir, { recursive: true, force: true });
});

const url = (host: string, ca: string, sslmode = 'verify-full') =>
  `postgres://postgres:${PASSWORD}@${host}:${port}/replyonce_tls?sslmode=${sslmode}&sslrootcert=${path.join(dir, ca)}`;

test('sslmode=verify-full with the CA: the migrations run, and the connection is encrypted', async () => {
  await migrateDatabase(url('localhost', 'ca.pem'), { log: () => undefined });
  const db = createDb(url('localhost', 'ca.pem'));
  try {
    const { rows } = await db.query<{ ssl: boolean; tables: number }>(
      `SELECT (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()) AS ssl,
              (SELECT count(*)::int FROM information_schema.tables WHERE table_name IN ('intake', 'operations')) AS tables`,
    );
    assert.deepEqual(rows[0], { ssl: true, tables: 2 });
  } finally {
    await db.end();
  }
});

test('a certificate of another CA, a host name the certificate does not carry, or plaintext: refused', async () => {
  const refused = async (connectionString: string, why: RegExp) => {
    const client = new Client({ connectionString });
    await assert.rejects(client.connect(), why);
    await client.end().catch(() => undefined);
  };
  await refused(url('localhost', 'other-ca.pem'), /self[- ]signed|unable to verify|certificate/i);
  await refused(url('127.0.0.1', 'ca.pem'), /Hostname\/IP does not match|altnames/i);
  await refused(
    `postgres://postgres:${PASSWORD}@localhost:${port}/replyonce_tls?sslmode=disable`,
    /no encryption|pg_hba/i,
  );
});

test(
  'the API and the worker processes start on DATABASE_URL with sslmode=verify-full',
  { timeout: 120_000 },
  async () => {
    const env = { DATABASE_URL: url('localhost', 'ca.pem') };
    const api = await AppProcess.startApi(h, { env });
    try {
      const ready = await fetch(`${api.url}/readyz`);
      assert.equal(ready.status, 200, 'ready: its Postgres (over TLS) answers');
      assert.deepEqual(await ready.json(), { status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } });
    } finally {
      await api.stop();
    }
    const worker = await AppProcess.startWorker(h, { env });
    await worker.stop();
  },
);

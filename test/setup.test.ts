// The set-up scripts against the suite's own servers (scripts/test.ts provides TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and a migrated DATABASE_URL).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Connection } from '@temporalio/client';
import { msToTs, tsToMs } from '@temporalio/common/lib/time';
import { migrateDatabase } from '../scripts/db-migrate';
import { SEARCH_ATTRIBUTES, setupTemporal } from '../scripts/services/temporal-setup';
import { databaseUrlFor, withClient } from '../scripts/services/postgres';

const DAY_MS = 24 * 60 * 60 * 1000;
const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the suite with \`npm test\``);
  return value;
}

describe('setupTemporal', () => {
  const address = requiredEnv('TEMPORAL_ADDRESS');
  let connection: Connection;

  before(async () => {
    connection = await Connection.connect({ address });
  });
  after(async () => {
    await connection.close();
  });

  async function retentionMs(namespace: string): Promise<number> {
    const described = await connection.workflowService.describeNamespace({ namespace });
    return tsToMs(described.config?.workflowExecutionRetentionTtl);
  }

  async function customAttributes(namespace: string): Promise<Record<string, number>> {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
    return customAttributes;
  }

  test('the suite namespace keeps closed workflows 7 days and has the search attributes', async () => {
    // Prepare
    const namespace = requiredEnv('TEMPORAL_NAMESPACE');

    // Assess
    assert.ok((await retentionMs(namespace)) >= 7 * DAY_MS);
    const attributes = await customAttributes(namespace);
    for (const name of SEARCH_ATTRIBUTES) assert.equal(attributes[name], KEYWORD, name);
  });

  test('creates a missing namespace, usable at once, and a second run changes nothing', async () => {
    // Prepare
    const namespace = `setup-test-${randomUUID()}`;

    // Act
    await setupTemporal({ address, namespace });
    await setupTemporal({ address, namespace });

    // Assess
    assert.equal(await retentionMs(namespace), 7 * DAY_MS);
    const attributes = await customAttributes(namespace);
    assert.deepEqual(
      SEARCH_ATTRIBUTES.map((name) => attributes[name]),
      SEARCH_ATTRIBUTES.map(() => KEYWORD),
    );
    await connection.workflowService.listWorkflowExecutions({ namespace, query: `InboxId = 'someone'` });
  });

  test('raises a retention shorter than asked for, and never lowers a longer one', async () => {
    // Prepare
    const namespace = `setup-test-${randomUUID()}`;
    await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(DAY_MS) });

    // Act
    await setupTemporal({ address, namespace, retentionDays: 7 });
    await setupTemporal({ address, namespace, retentionDays: 3 });

    // Assess
    assert.equal(await retentionMs(namespace), 7 * DAY_MS);
  });

  test('--check (always so on Temporal Cloud) creates nothing: it passes a ready namespace and says what to do for the rest', async () => {
    // Prepare
    const ready = `setup-test-${randomUUID()}`;
    await setupTemporal({ address, namespace: ready });
    const missing = `setup-test-${randomUUID()}`;
    const bare = `setup-test-${randomUUID()}`;
    await connection.workflowService.registerNamespace({
      namespace: bare,
      workflowExecutionRetentionPeriod: msToTs(DAY_MS),
    });

    // Act, Assess
    assert.equal(await setupTemporal({ address, namespace: ready, checkOnly: true }), 'checked');
    await assert.rejects(
      setupTemporal({ address, namespace: missing, checkOnly: true }),
      /namespace .* does not exist\. Create it in Temporal Cloud's UI .*tcld namespace create --namespace setup-test-/,
    );
    await assert.rejects(connection.workflowService.describeNamespace({ namespace: missing }), 'nothing was created');
    await assert.rejects(
      setupTemporal({ address, namespace: bare, checkOnly: true }),
      (error: Error) =>
        /its retention is 1 day; replyonce needs at least 7 days/.test(error.message) &&
        /lacks the search attributes InboxId, MessageId, ThreadId, ReplyStatus/.test(error.message) &&
        /--search-attribute InboxId=Keyword/.test(error.message),
    );
    assert.equal(await retentionMs(bare), DAY_MS, 'the retention was left alone');
    assert.equal((await customAttributes(bare)).InboxId, undefined, 'no search attribute was added');
  });

  test('names TEMPORAL_ADDRESS when the server is unreachable', async () => {
    await assert.rejects(
      setupTemporal({ address: '127.0.0.1:1', namespace: 'unreachable', connectTimeoutMs: 300 }),
      /TEMPORAL_ADDRESS/,
    );
  });
});

/** A TCP port that accepts connections and never says a word: a TLS handshake on it never completes. */
async function silentListener(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('temporal:setup against a TLS port that accepts and never completes the handshake', () => {
  test('the library gives up within its timeout, and names TEMPORAL_ADDRESS', async () => {
    // Prepare
    const listener = await silentListener();
    after(() => listener.close());
    const target = `127.0.0.1:${listener.port}`;
    const started = Date.now();

    // Act
    await assert.rejects(
      setupTemporal({
        namespace: 'silent',
        connectTimeoutMs: 1_000,
        connection: {
          address: target,
          namespace: 'silent',
          connectionOptions: { address: target, tls: true },
          security: 'TLS',
        },
      }),
      /cannot reach Temporal at 127\.0\.0\.1:\d+ .*\(TEMPORAL_ADDRESS\)/,
    );

    // Assess: bounded by connectTimeoutMs. (The half-open socket stays open even after Connection.close():
    // the CLI below is why the process still exits.)
    assert.ok(Date.now() - started < 10_000, `gave up after ${Date.now() - started} ms`);
  });

  test('`npm run temporal:setup` prints one line naming TEMPORAL_ADDRESS and exits 1 within a bounded time', async () => {
    // Prepare
    const listener = await silentListener();
    after(() => listener.close());
    const started = Date.now();

    // Act
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(__dirname, '..', 'scripts', 'temporal-setup.ts')],
      {
        env: {
          ...process.env,
          TEMPORAL_ADDRESS: `127.0.0.1:${listener.port}`,
          TEMPORAL_TLS: 'true',
          TEMPORAL_NAMESPACE: 'silent',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 60_000);
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });

    // Assess
    assert.equal(code, 1, `exit code (null: still running after 60 s); stderr:\n${stderr}`);
    assert.match(stderr, /^error: cannot reach Temporal at .*\(TEMPORAL_ADDRESS\)/m);
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    assert.ok(Date.now() - started < 60_000);
  });
});

describe('migrateDatabase', () => {
  const databaseUrl = requiredEnv('DATABASE_URL');

  test('the suite database has the tables, and migrating again is a no-op', async () => {
    // Act
    const applied = await migrateDatabase(databaseUrl, { log: () => undefined });

    // Assess
    assert.deepEqual(applied, []);
    const tables = await withClient(databaseUrl, async (client) => {
      const { rows } = await client.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
      );
      return rows.map((row) => row.table_name);
    });
    for (const table of ['inbound_events', 'operations', 'pgmigrations'])
      assert.ok(tables.includes(table), `${table} in ${tables.join(', ')}`);
  });

  describe('on a database of its own', () => {
    const scratchName = `replyonce_setup_test_${process.pid}`;
    const scratchUrl = databaseUrlFor(databaseUrl, scratchName);
    let dir: string;

    before(async () => {
      await withClient(databaseUrl, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(scratchName)} WITH (FORCE)`);
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(scratchName)}`);
      });
      dir = mkdtempSync(path.join(tmpdir(), 'replyonce-migrations-'));
      writeFileSync(
        path.join(dir, '1700000000000_first.sql'),
        '-- Up Migration\nCREATE TABLE first (id int PRIMARY KEY);\n\n-- Down Migration\nDROP TABLE first;\n',
      );
      writeFileSync(
        path.join(dir, '1700000000001_second.sql'),
        '-- Up Migration\nCREATE TABLE second (id int PRIMARY KEY);\n-- Down Migration\nDROP TABLE second;\n',
      );
      writeFileSync(path.join(dir, 'README.md'), 'not a migration\n');
    });
    after(async () => {
      rmSync(dir, { recursive: true, force: true });
      await withClient(databaseUrl, (client) =>
        client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(scratchName)} WITH (FORCE)`),
      );
    });

    test('two migrators at once apply each migration exactly once; other files are ignored', async () => {
      // Act
      const runs = await Promise.all([
        migrateDatabase(scratchUrl, { dir, log: () => undefined }),
        migrateDatabase(scratchUrl, { dir, log: () => undefined }),
      ]);
      const again = await migrateDatabase(scratchUrl, { dir, log: () => undefined });

      // Assess
      assert.deepEqual(runs.flat().sort(), ['1700000000000_first', '1700000000001_second']);
      assert.deepEqual(again, []);
      const tables = await withClient(scratchUrl, async (client) => {
        const { rows } = await client.query<{ name: string }>(
          `SELECT to_regclass('first')::text AS name UNION ALL SELECT to_regclass('second')::text`,
        );
        return rows.map((row) => row.name);
      });
      assert.deepEqual(tables, ['first', 'second']);
    });
  });

  test('names DATABASE_URL when the server is unreachable', async () => {
    await assert.rejects(
      migrateDatabase('postgres://nobody:nothing@127.0.0.1:1/none', { log: () => undefined }),
      /DATABASE_URL/,
    );
  });
});

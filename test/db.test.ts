import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkOut, createDb, inTransaction } from '../lib/db';
import { testEnv } from './support/env';

test('a session that stops talking inside a transaction is ended by Postgres, and the locks it held are free again', async () => {
  // Prepare: one connection takes an advisory lock in a transaction and then goes silent, as a
  // worker frozen (or cut off) between two statements of the reply budget's reservation would.
  const stuck = createDb(testEnv.databaseUrl, { idleInTransactionTimeoutMs: 500 });
  const other = createDb(testEnv.databaseUrl);
  const client = await stuck.connect();
  client.on('error', () => undefined); // the server ends this session: that is the point
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(424242, 1)');

    // Act
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const { rows } = await other.query<{ got: boolean }>('SELECT pg_try_advisory_lock(424242, 1) AS got');

    // Assess
    assert.equal(rows[0]?.got, true, 'the silent session was ended and its lock released');
    await other.query('SELECT pg_advisory_unlock(424242, 1)');
  } finally {
    client.release(true);
    await Promise.all([stuck.end(), other.end()]);
  }
});

test('a checked-out client whose connection dies mid-transaction fails its statement, and the process lives on', async () => {
  // Prepare: the relay's and the reply budget's shape — a transaction on a client of its own.
  const db = createDb(testEnv.databaseUrl);
  const admin = createDb(testEnv.databaseUrl);
  const client = await checkOut(db);
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const ended = new Promise((resolve) => client.once('end', resolve));

    // Act: the server ends the session under it (as a Postgres restart does). Without a listener
    // the client's 'error' event would be an uncaught exception, which fails this test.
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
    await ended;

    // Assess
    await assert.rejects(client.query('COMMIT'));
    assert.equal((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one, 1, 'the pool serves a new client');
  } finally {
    client.release();
    await Promise.all([db.end(), admin.end()]);
  }
});

test('inTransaction commits what its work returns, rolls back what it throws, and gives the client back either way', async () => {
  // Prepare: a pool of one client, so a client not given back would hang the next call.
  const db = createDb(testEnv.databaseUrl, { max: 1 });
  const table = `tx_probe_${process.pid}_${Date.now()}`;
  try {
    await db.query(`CREATE TABLE ${table} (n int)`);

    // Act
    const returned = await inTransaction(db, async (client) => {
      await client.query(`INSERT INTO ${table} VALUES (1)`);
      return 'kept';
    });
    await assert.rejects(
      inTransaction(db, async (client) => {
        await client.query(`INSERT INTO ${table} VALUES (2)`);
        throw new Error('the work failed');
      }),
      /the work failed/,
    );

    // Assess
    assert.equal(returned, 'kept');
    const { rows } = await db.query<{ n: number }>(`SELECT n FROM ${table} ORDER BY n`);
    assert.deepEqual(
      rows.map((r) => r.n),
      [1],
      'the first insert committed, the second rolled back',
    );
  } finally {
    await db.query(`DROP TABLE IF EXISTS ${table}`);
    await db.end();
  }
});

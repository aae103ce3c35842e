import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDb } from '../lib/db';
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

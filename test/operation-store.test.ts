import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  OperationConflictError,
  OperationFailedError,
  OperationInProgressError,
  LeaseLostError,
} from '../activities/operation-store/errors';
import { OperationStore } from '../activities/operation-store/store';
import { createDb, type Db } from '../lib/db';
import { requestHash } from '../lib/hashing';
import { testEnv } from './support/env';

// The claim protocol of DESIGN.md against the real Postgres the suite runs on.
let db: Db;
let store: OperationStore;
before(() => {
  db = createDb(testEnv.databaseUrl);
  store = new OperationStore(db);
});
after(() => db.end());

const newKey = () => `test-inbox/${randomUUID()}/reply/v1`;
const claimOf = (key: string, owner: string, request: unknown = { text: 'hello' }, leaseMs = 60_000) =>
  store.claim({ key, kind: 'reply', requestHash: requestHash(request), ownerToken: owner, leaseMs });

describe('the operation store', () => {
  test('the first claim owns the effect; a completed row replays its stored result', async () => {
    // Prepare
    const key = newKey();
    // Act
    const first = await claimOf(key, 'attempt-1');
    await store.complete(key, 'attempt-1', { messageId: 'm-1' });
    const second = await claimOf(key, 'attempt-2');
    // Assess
    assert.equal(first.state, 'owned');
    assert.equal(first.state === 'owned' && first.resumed, false);
    assert.equal(first.state === 'owned' && first.attempts, 1);
    assert.deepEqual(second, { state: 'complete', result: { messageId: 'm-1' } });
  });

  test('the same key with a different request is a conflict, whatever the row status', async () => {
    const key = newKey();
    await claimOf(key, 'attempt-1', { text: 'hello' });
    await assert.rejects(claimOf(key, 'attempt-2', { text: 'something else' }), OperationConflictError);
    await store.complete(key, 'attempt-1', { ok: true });
    await assert.rejects(claimOf(key, 'attempt-3', { text: 'something else' }), OperationConflictError);
  });

  test('a live lease held by another attempt is "in progress"; an expired one is taken over and resumed', async () => {
    const key = newKey();
    await claimOf(key, 'attempt-1', undefined, 300);
    await assert.rejects(claimOf(key, 'attempt-2'), OperationInProgressError);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const takeover = await claimOf(key, 'attempt-2');
    assert.equal(takeover.state, 'owned');
    assert.equal(takeover.state === 'owned' && takeover.resumed, true);
    assert.equal(takeover.state === 'owned' && takeover.attempts, 2);
  });

  test('an attempt that lost its lease cannot complete or fail the row; the new owner can', async () => {
    const key = newKey();
    await claimOf(key, 'slow-attempt', undefined, 100);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await claimOf(key, 'new-attempt');
    await assert.rejects(store.complete(key, 'slow-attempt', { messageId: 'stale' }), LeaseLostError);
    await assert.rejects(store.fail(key, 'slow-attempt', { type: 'X', message: 'stale' }), LeaseLostError);
    await store.complete(key, 'new-attempt', { messageId: 'fresh' });
    assert.deepEqual((await store.get(key))?.result, { messageId: 'fresh' });
  });

  test('concurrent claims of one key: exactly one owner', async () => {
    const key = newKey();
    const claims = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => claimOf(key, `attempt-${i}`)));
    const owners = claims.filter((c) => c.status === 'fulfilled' && c.value.state === 'owned');
    const busy = claims.filter((c) => c.status === 'rejected' && c.reason instanceof OperationInProgressError);
    assert.equal(owners.length, 1);
    assert.equal(busy.length, 19);
  });

  test('a terminal failure is replayed, not retried', async () => {
    const key = newKey();
    await claimOf(key, 'attempt-1');
    await store.fail(key, 'attempt-1', { type: 'ReplyConflict', message: 'refused' });
    const replay = await claimOf(key, 'attempt-2').catch((error: unknown) => error);
    assert.ok(replay instanceof OperationFailedError);
    assert.deepEqual(replay.failure, { type: 'ReplyConflict', message: 'refused' });
  });

  test('a released lease (retryable failure) is taken over at once by the next attempt', async () => {
    const key = newKey();
    await claimOf(key, 'attempt-1');
    await store.release(key, 'attempt-1');
    const next = await claimOf(key, 'attempt-2');
    assert.equal(next.state === 'owned' && next.resumed, true);
  });

  test('renewing keeps the lease exclusive; renewing a lost lease says so', async () => {
    const key = newKey();
    await claimOf(key, 'attempt-1', undefined, 300);
    assert.equal(await store.renew(key, 'attempt-1', 60_000), true);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await assert.rejects(claimOf(key, 'attempt-2'), OperationInProgressError);
    assert.equal(await store.renew(key, 'attempt-2', 60_000), false);
  });
  test('the typed read returns a completed result of its kind only: nothing while processing, an error for another kind', async () => {
    // Prepare
    const key = newKey();
    const missing = await store.completed<{ messageId: string }>(key, 'reply');
    await claimOf(key, 'attempt-1');
    const processing = await store.completed<{ messageId: string }>(key, 'reply');
    await store.complete(key, 'attempt-1', { messageId: 'm-1' });

    // Act
    const done = await store.completed<{ messageId: string }>(key, 'reply');

    // Assess
    assert.deepEqual([missing, processing, done], [undefined, undefined, { messageId: 'm-1' }]);
    await assert.rejects(store.completed(key, 'draft'), OperationConflictError);
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../api/app';
import { createDb, type Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../lib/keys';
import { createLogger } from '../lib/logger';
import { AppProcess } from './support/app-process';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { signedHeaders } from './support/signing';
import { TcpProxy } from './support/tcp-proxy';
import { workflowExists } from './support/temporal';

// The ingress when what it depends on fails: Postgres or Temporal unreachable, or the ingress
// itself dying between the workflow start and its answer. The sender's retry is the recovery:
// every failure must answer 500 (or nothing) with nothing half-recorded, and the retry must
// lead to exactly one reply. The harness's in-process worker answers the messages.
let h: Harness;
before(async () => {
  h = await Harness.start();
});
after(() => h.close());

/** A message the sandbox holds but has not announced: the test delivers its webhook itself. */
async function undeliveredMessage(): Promise<{ ref: MessageRef; body: string; eventId: string }> {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `down-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Hi',
    text: 'Anyone there?',
    deliver: false,
  });
  const body = JSON.stringify({
    type: 'event',
    event_type: 'message.received',
    event_id: inbound.event_id,
    message: inbound.message,
    thread: inbound.thread,
  });
  return { ref: { inboxId, messageId: inbound.message.message_id }, body, eventId: inbound.event_id };
}

const post = (baseUrl: string, body: string) =>
  fetch(`${baseUrl}/webhooks/agentmail`, { method: 'POST', body, headers: signedHeaders(h.webhookSecret, body) });

async function eventRows(eventId: string) {
  return (await h.db.query('SELECT outcome FROM inbound_events WHERE event_id = $1', [eventId])).rows as Array<{
    outcome: string;
  }>;
}

async function runs(ref: MessageRef): Promise<number> {
  let count = 0;
  for await (const _ of h.client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(ref)}'` })) count += 1;
  return count;
}

/** An ingress whose Postgres and Temporal connections go through proxies the test can cut. */
async function ingressBehindProxies(deadlineMs: number) {
  const pgUrl = new URL(testEnv.databaseUrl);
  const pgProxy = await TcpProxy.start(`${pgUrl.hostname}:${pgUrl.port}`);
  const temporalProxy = await TcpProxy.start(testEnv.temporalAddress);
  pgUrl.host = pgProxy.address;
  const db: Db = createDb(pgUrl.toString(), { queryTimeoutMs: deadlineMs, connectTimeoutMs: deadlineMs });
  const connection = Connection.lazy({ address: temporalProxy.address, connectTimeout: deadlineMs });
  const app: FastifyInstance = buildApp({
    db,
    temporal: new Client({ connection, namespace: testEnv.namespace }),
    taskQueue: h.taskQueue,
    webhookSecret: h.webhookSecret,
    deadlineMs,
    bodyLimitBytes: 1_048_576,
    logger: createLogger('test-api', process.env.TEST_LOG_LEVEL ?? 'silent'),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    pgProxy,
    temporalProxy,
    db,
    close: async () => {
      await app.close();
      await connection.close();
      await db.end();
      await pgProxy.close();
      await temporalProxy.close();
    },
  };
}

describe('dependencies down at the ingress', () => {
  test('Postgres unreachable → 500 within the deadline, nothing recorded, no workflow; the retry after recovery → one reply', async () => {
    const ingress = await ingressBehindProxies(1_500);
    try {
      const { ref, body, eventId } = await undeliveredMessage();
      ingress.pgProxy.cut();
      const started = Date.now();
      const response = await post(ingress.url, body);
      assert.equal(response.status, 500);
      assert.ok(Date.now() - started < 5_000, 'answered inside the deadline, far inside AgentMail 15 s');
      assert.deepEqual(await eventRows(eventId), []);
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false);

      ingress.pgProxy.restore();
      assert.equal((await post(ingress.url, body)).status, 204);
      assert.equal((await h.workflowResult(ref)).status, 'sent');
      assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }]);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    } finally {
      await ingress.close();
    }
  });

  test('Postgres unreachable: an event this process recorded is still answered 204 (from memory), a new one 500', async () => {
    const ingress = await ingressBehindProxies(1_500);
    try {
      const known = await undeliveredMessage();
      assert.equal((await post(ingress.url, known.body)).status, 204);
      const fresh = await undeliveredMessage();
      ingress.pgProxy.cut();
      assert.equal((await post(ingress.url, known.body)).status, 204, 'a retry of a recorded event needs no lookup');
      assert.equal((await post(ingress.url, fresh.body)).status, 500, 'an unknown event still needs Postgres');
      ingress.pgProxy.restore();
      assert.equal((await h.workflowResult(known.ref)).status, 'sent');
      assert.equal((await h.sandbox.outbox({ inbox_id: known.ref.inboxId })).length, 1);
      assert.deepEqual(await eventRows(fresh.eventId), []);
    } finally {
      await ingress.close();
    }
  });

  test('Postgres failing after the workflow started (its insert blocked) → 500; the retry finds the workflow → one run, one reply', async () => {
    const ingress = await ingressBehindProxies(1_500);
    const locker = await h.db.connect();
    try {
      const { ref, body, eventId } = await undeliveredMessage();
      // Reads of inbound_events still work; the insert waits on the lock until its timeout.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE inbound_events IN EXCLUSIVE MODE');
      const response = await post(ingress.url, body);
      await locker.query('ROLLBACK');
      assert.equal(response.status, 500);
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), true, 'the start had been acknowledged');

      // The insert the ingress gave up on may still land once the lock is gone (the server cancels
      // it on its own statement timeout, which can lag the client's): then the row says 'queued',
      // which is true, since the start was acknowledged. Otherwise the retry records 'duplicate'.
      assert.equal((await post(ingress.url, body)).status, 204);
      const rows = await eventRows(eventId);
      assert.equal(rows.length, 1);
      assert.ok(['queued', 'duplicate'].includes(rows[0]!.outcome), `recorded ${rows[0]!.outcome}`);
      assert.equal((await h.workflowResult(ref)).status, 'sent');
      assert.equal(await runs(ref), 1);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    } finally {
      locker.release();
      await ingress.close();
    }
  });

  test('Temporal unreachable → 500 within the deadline, nothing recorded; the retry after recovery → one reply', async () => {
    const ingress = await ingressBehindProxies(1_500);
    try {
      const { ref, body, eventId } = await undeliveredMessage();
      ingress.temporalProxy.cut();
      const started = Date.now();
      const response = await post(ingress.url, body);
      assert.equal(response.status, 500);
      assert.ok(Date.now() - started < 5_000, 'answered inside the deadline');
      assert.deepEqual(await eventRows(eventId), []);
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false);

      ingress.temporalProxy.restore();
      const retried = await retryUntil2xx(() => post(ingress.url, body));
      assert.equal(retried, 204);
      assert.equal((await h.workflowResult(ref)).status, 'sent');
      assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }]);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    } finally {
      await ingress.close();
    }
  });
});

describe('the ingress dying between the start and its answer', () => {
  test('the sender sees no answer; its retry finds the workflow: one run, one reply', async () => {
    const { ref, body, eventId } = await undeliveredMessage();
    const dying = await AppProcess.startApi(h, { failpoints: ['ingress.after-start'] });
    await assert.rejects(post(dying.url, body), 'the connection dies with the process');
    assert.equal((await dying.exited).signal, 'SIGKILL');
    assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), true);
    assert.deepEqual(await eventRows(eventId), []);

    const healthy = await AppProcess.startApi(h);
    try {
      assert.equal((await post(healthy.url, body)).status, 204);
    } finally {
      await healthy.stop();
    }
    assert.deepEqual(await eventRows(eventId), [{ outcome: 'duplicate' }]);
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    assert.equal(await runs(ref), 1);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });
});

/** Like the sender: retry a few times, briefly, while the client reconnects. */
async function retryUntil2xx(deliver: () => Promise<Response>): Promise<number> {
  let status = 0;
  for (let attempt = 0; attempt < 10; attempt += 1) {
    status = (await deliver()).status;
    if (status < 300) return status;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return status;
}

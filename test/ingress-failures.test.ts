import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../api/app';
import { IntakeStore } from '../intake/intake-store';
import { IntakeRelay, RELAY_DEFAULTS } from '../intake/relay';
import { createDb, type Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../contract';
import { createLogger, type Logger } from '../lib/logger';
import { intakeStarts, registry } from '../lib/metrics';
import { messageReceivedBody } from '../sandbox/control-client';
import { AppProcess } from './support/app-process';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { signedHeaders } from './support/signing';
import { TcpProxy } from './support/tcp-proxy';
import { connectClient, eventually, workflowExists } from './support/temporal';
import { within } from './support/workflow-watch';

// The ingress when what it depends on fails: Postgres unreachable or slow, Temporal unreachable,
// the ingress dying between its commit and the workflow's start, relays racing. The answer
// depends on Postgres alone: Postgres failing → 500 with nothing half-recorded (the sender's
// retry is the recovery); anything after the commit is the intake's to finish (its starter, then
// a relay), and every message is answered exactly once. The harness's in-process worker answers
// the messages; its API runs no relay, so each test shows whose relay started what.
let h: Harness;
before(async () => {
  h = await Harness.start({ relay: false });
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
  const body = messageReceivedBody(inbound, inbound.event_id);
  return { ref: { inboxId, messageId: inbound.message.message_id }, body, eventId: inbound.event_id };
}

/** Bounded like a sender's request (Svix gives up after 15 s): a hung ingress fails the test instead of stalling it. */
const post = (baseUrl: string, body: string) =>
  fetch(`${baseUrl}/webhooks/agentmail`, {
    method: 'POST',
    body,
    headers: signedHeaders(h.webhookSecret, body),
    signal: AbortSignal.timeout(20_000),
  });

async function eventRows(eventId: string) {
  return (await h.db.query('SELECT outcome FROM inbound_events WHERE event_id = $1', [eventId])).rows as Array<{
    outcome: string;
  }>;
}

/** A log sink for a relay built in this process, to count what each one started. */
function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
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
      assert.equal(await h.intakeRow(ref), undefined, 'no intake row: nothing half-recorded');
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false);

      ingress.pgProxy.restore();
      assert.equal(await retryUntil2xx(() => post(ingress.url, body)), 204);
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
      assert.equal(await h.intakeRow(fresh.ref), undefined);
    } finally {
      await ingress.close();
    }
  });

  test('Postgres slower than the deadline (the intake insert blocked) → 500 in time; the statement lands whole or not at all; the retry → one row, one run, one reply', async () => {
    const ingress = await ingressBehindProxies(1_500);
    const locker = await h.db.connect();
    try {
      const { ref, body, eventId } = await undeliveredMessage();
      // Reads still work; the one statement that writes the event and the intake row waits on the lock.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE intake IN EXCLUSIVE MODE');
      const started = Date.now();
      const response = await post(ingress.url, body);
      assert.equal(response.status, 500);
      assert.ok(Date.now() - started < 3_000, `answered after ${Date.now() - started} ms (deadline 1.5 s)`);
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false, 'nothing was started');
      await locker.query('ROLLBACK');

      // The statement the ingress gave up on may still commit once the lock is gone (the server
      // cancels it on its own statement timeout): then it is complete — event and row together —
      // and the retry is a known event. Otherwise the retry records both. Either way: one of each.
      assert.equal(await retryUntil2xx(() => post(ingress.url, body)), 204);
      assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }]);
      assert.ok(await h.intakeRow(ref), 'the intake row is there with its event');
      assert.equal((await h.workflowResult(ref, 30_000)).status, 'sent');
      assert.equal(await runs(ref), 1);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    } finally {
      locker.release();
      await ingress.close();
    }
  });

  test('Temporal unreachable → 204 within the deadline, the row accepted and unstarted (backlog on /metrics, /readyz 200); once Temporal is back the relay starts it: one run, one reply', async () => {
    const ingress = await ingressBehindProxies(1_500);
    try {
      const { ref, body, eventId } = await undeliveredMessage();
      ingress.temporalProxy.cut();
      const started = Date.now();
      const response = await post(ingress.url, body);
      assert.equal(response.status, 204, 'the message is ours once the row is committed');
      assert.ok(Date.now() - started < 1_500, `answered after ${Date.now() - started} ms, without Temporal`);
      assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }]);

      // The starter's try fails (its deadline), the row records it and backs off; nothing is started.
      const failed = await eventually(
        async () => ((await h.intakeRow(ref))?.last_start_error ? await h.intakeRow(ref) : undefined),
        'the failed start to be recorded on the row',
      );
      assert.equal(failed?.started_at, null);
      assert.ok((failed?.attempts ?? 0) >= 1);
      assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false);
      // The metrics are the process's (api/main.ts serves them on their own port): read them in-process.
      const metrics = await registry.metrics();
      assert.match(metrics, /^replyonce_intake_backlog\{state="backing_off"\} [1-9]\d*$/m);
      assert.match(metrics, /^replyonce_intake_oldest_unstarted_seconds [0-9.]+$/m);
      assert.equal((await fetch(`${ingress.url}/readyz`)).status, 200, 'ready: accepting needs Postgres alone');

      ingress.temporalProxy.restore();
      const row = await eventually(
        async () => ((await h.intakeRow(ref))?.started_at ? await h.intakeRow(ref) : undefined),
        'the relay to start the workflow once Temporal is back',
        45_000,
      );
      assert.equal(row?.last_start_error, null);
      assert.equal((await h.workflowResult(ref)).status, 'sent');
      assert.equal(await runs(ref), 1);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    } finally {
      await ingress.close();
    }
  });
});

describe('the ingress dying between its commit and the start', () => {
  test("SIGKILLed after the commit: no answer, the row is accepted and unstarted; another replica's relay starts it: one run, one reply", async () => {
    const { ref, body, eventId } = await undeliveredMessage();
    const dying = await AppProcess.startApi(h, { failpoints: ['intake.after-commit'] });
    await assert.rejects(
      post(dying.url, body),
      (error: unknown) => !(error instanceof Error && error.name === 'TimeoutError'),
      'the connection dies with the process (not a timeout)',
    );
    assert.equal((await within(10_000, dying.exited, 'the API to die at its failpoint')).signal, 'SIGKILL');
    assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }], 'the commit came before the crash');
    assert.equal((await h.intakeRow(ref))?.started_at, null);
    assert.equal(await workflowExists(h.client, inboundWorkflowId(ref)), false, 'the start never happened');

    const healthy = await AppProcess.startApi(h);
    try {
      // The sender retries: a known event, answered at once; the start is the relay's.
      assert.equal((await post(healthy.url, body)).status, 204);
      await eventually(
        async () => ((await h.intakeRow(ref))?.started_at ? true : undefined),
        'the relay to start the stranded row',
        30_000,
      );
      assert.equal(healthy.logs('intake relay: workflow started', { workflowId: inboundWorkflowId(ref) }).length, 1);
    } finally {
      await healthy.stop();
    }
    assert.deepEqual(await eventRows(eventId), [{ outcome: 'queued' }]);
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    assert.equal(await runs(ref), 1);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });
});

describe('relays racing', () => {
  test(
    "two replicas' relays over one backlog of 200 rows → each workflow started once (Temporal's answers counted), every message answered once",
    { timeout: 240_000 },
    async () => {
      // Prepare: 200 messages handed over (as a catch-up would) and nobody has started them yet.
      const inboxId = h.newInbox();
      const refs: MessageRef[] = [];
      for (let i = 0; i < 200; i += 1) {
        const inbound = await h.sandbox.inbound({
          inbox_id: inboxId,
          from: `race-${randomUUID().slice(0, 8)}@customer.example`,
          subject: 'Race',
          text: 'Once, please.',
          deliver: false,
        });
        refs.push({ inboxId, messageId: inbound.message.message_id });
      }
      const { created } = await new IntakeStore(h.db, h.taskQueue).acceptBatch(inboxId, refs, undefined);
      assert.equal(created.size, 200);
      const before = await startsCounted();

      // Act: two relays, each with its own Postgres pool and Temporal connection, as two replicas.
      const replicas = await Promise.all(
        [0, 1].map(async () => {
          const db = createDb(testEnv.databaseUrl);
          const { client, connection } = await connectClient();
          const sink = capturingLogger();
          const relay = new IntakeRelay(
            { db, temporal: client, taskQueue: h.taskQueue, logger: sink.logger },
            { ...RELAY_DEFAULTS, batchSize: 20, pollMs: 200 },
          );
          return { db, connection, relay, lines: sink.lines };
        }),
      );
      try {
        for (const replica of replicas) replica.relay.start();
        await eventually(
          async () => {
            const { rows } = await h.db.query<{ n: string }>(
              'SELECT count(*) AS n FROM intake WHERE task_queue = $1 AND inbox_id = $2 AND started_at IS NULL',
              [h.taskQueue, inboxId],
            );
            return Number(rows[0]?.n) === 0 ? true : undefined;
          },
          'every row to be started',
          60_000,
        );
      } finally {
        for (const replica of replicas) {
          await replica.relay.close();
          await replica.connection.close();
          await replica.db.end();
        }
      }

      // Assess: 200 starts, each one Temporal answered "started" (a second start of one workflow would
      // have been answered "existed"); each row tried once; both replicas took part.
      const after = await startsCounted();
      assert.deepEqual(
        { started: after.started - before.started, existed: after.existed - before.existed },
        { started: 200, existed: 0 },
      );
      const perRelay = replicas.map((r) => r.lines.filter((l) => l.msg === 'intake relay: workflow started').length);
      assert.equal(perRelay[0]! + perRelay[1]!, 200);
      assert.ok(
        perRelay.every((n) => n > 0),
        `both relays started some: ${perRelay.join(' + ')}`,
      );
      const { rows } = await h.db.query<{ attempts: number }>('SELECT attempts FROM intake WHERE inbox_id = $1', [
        inboxId,
      ]);
      assert.deepEqual([...new Set(rows.map((r) => r.attempts))], [1]);

      await eventually(
        async () => ((await h.sandbox.outbox({ inbox_id: inboxId })).length >= 200 ? true : undefined),
        'every message to be answered',
        180_000,
      );
      const outbox = await h.sandbox.outbox({ inbox_id: inboxId });
      const perMessage = new Map<string, number>();
      for (const entry of outbox) {
        const key = entry.message.in_reply_to ?? '';
        perMessage.set(key, (perMessage.get(key) ?? 0) + 1);
      }
      assert.equal(perMessage.size, 200);
      assert.deepEqual([...new Set(perMessage.values())], [1], 'one reply per message');
    },
  );
});

/** The relay's starts as Temporal answered them (this process's counter). */
async function startsCounted(): Promise<{ started: number; existed: number }> {
  const values = (await intakeStarts.get()).values;
  const of = (outcome: string) =>
    values.find((v) => v.labels.by === 'relay' && v.labels.outcome === outcome)?.value ?? 0;
  return { started: of('started'), existed: of('existed') };
}

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

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { Db } from '../lib/db';
import { intakeStarts, webhooks } from '../lib/metrics';
import { inboundWorkflowId } from '../lib/hashing';
import { startIngressOnly, type IngressOnly } from './support/ingress-only';
import { messageReceivedPayload, newWebhookSecret, signedHeaders } from './support/signing';
import { eventually, workflowExists } from './support/temporal';

// The ingress alone, against real Temporal and Postgres: no worker polls this task queue, so
// started workflows stay queued and the test sees exactly what the ingress did. The answer comes
// after one Postgres commit (the event and the intake row); the workflow is started after it.
let ingress: IngressOnly;
let app: FastifyInstance;
let db: Db;
let client: Client;
let secret: string;

before(async () => {
  ingress = await startIngressOnly({ bodyLimitBytes: 64 * 1024 });
  ({ app, db, client, secret } = ingress);
});
after(() => ingress.close());

const post = (body: string, headers: Record<string, string>) =>
  app.inject({ method: 'POST', url: '/webhooks/agentmail', payload: body, headers });
const eventRow = async (eventId: string) =>
  (await db.query('SELECT * FROM inbound_events WHERE event_id = $1', [eventId])).rows[0];
interface IntakeRow {
  inbox_id: string;
  message_id: string;
  thread_id: string | null;
  first_event_id: string | null;
  message_at: Date;
  started_at: Date | null;
  attempts: number;
  last_start_error: string | null;
}
const intakeRow = async (message: { inboxId: string; messageId: string }) =>
  (await db.query<IntakeRow>('SELECT * FROM intake WHERE workflow_id = $1', [inboundWorkflowId(message)]))
    .rows[0] as IntakeRow;
const cursorOf = async (inboxId: string) =>
  (
    await db.query<{ newest_message_at: Date }>('SELECT newest_message_at FROM inbox_cursors WHERE inbox_id = $1', [
      inboxId,
    ])
  ).rows[0]?.newest_message_at;
const outcomeCount = async (outcome: string) =>
  (await webhooks.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
const newMessage = () => ({
  inboxId: `support-${randomUUID().slice(0, 8)}@example.com`,
  messageId: `<${randomUUID()}@mail.example.com>`,
});

describe('webhook signature', () => {
  const cases: Array<[string, (body: string) => { body: string; headers: Record<string, string> }]> = [
    ['a signature made with another secret', (body) => ({ body, headers: signedHeaders(newWebhookSecret(), body) })],
    [
      'a body changed after signing',
      (body) => ({ body: body.replace('Where', 'Whence'), headers: signedHeaders(secret, body) }),
    ],
    [
      'a stale timestamp (10 minutes old)',
      (body) => ({ body, headers: signedHeaders(secret, body, { timestamp: new Date(Date.now() - 10 * 60_000) }) }),
    ],
    ['missing svix headers', (body) => ({ body, headers: { 'content-type': 'application/json' } })],
    [
      'an empty signature header',
      (body) => ({ body, headers: { ...signedHeaders(secret, body), 'svix-signature': '' } }),
    ],
  ];
  for (const [name, make] of cases) {
    test(`${name} → 400, nothing recorded, no workflow started`, async () => {
      const message = newMessage();
      const payload = messageReceivedPayload(message);
      const { body, headers } = make(JSON.stringify(payload));
      const response = await post(body, headers);
      assert.equal(response.statusCode, 400);
      assert.equal(response.json().error, 'invalid_signature');
      assert.equal(await eventRow(payload.event_id), undefined);
      assert.equal(await intakeRow(message), undefined);
      assert.equal(await workflowExists(client, inboundWorkflowId(message)), false);
    });
  }
});

describe('webhook delivery', () => {
  test('a signed message.received is recorded (event queued, intake row) before the 204; its workflow is started right after', async () => {
    const message = newMessage();
    const payload = messageReceivedPayload(message);
    const body = JSON.stringify(payload);
    const response = await post(body, signedHeaders(secret, body));
    assert.equal(response.statusCode, 204);
    // Committed before the answer: both rows are there the moment the 204 is.
    const row = await eventRow(payload.event_id);
    assert.equal(row.outcome, 'queued');
    assert.equal(row.workflow_id, inboundWorkflowId(message));
    const job = await intakeRow(message);
    assert.deepEqual(
      [job.inbox_id, job.message_id, job.thread_id, job.first_event_id],
      [message.inboxId, message.messageId, payload.message.thread_id, payload.event_id],
    );
    assert.equal(job.message_at.toISOString(), new Date(payload.message.timestamp).toISOString());

    const started = await eventually(
      async () => ((await intakeRow(message)).started_at ? await intakeRow(message) : undefined),
      'the intake to start the workflow',
    );
    assert.equal(started.attempts, 1, 'started by the first try, right after the commit');
    assert.equal(started.last_start_error, null);
    const description = await client.workflow.getHandle(inboundWorkflowId(message)).describe();
    assert.equal(description.type, 'inboundMessageWorkflow');
    assert.deepEqual(description.searchAttributes.MessageId, [message.messageId]);
    assert.deepEqual(description.searchAttributes.InboxId, [message.inboxId]);
    assert.deepEqual(description.searchAttributes.ThreadId, [payload.message.thread_id]);
    assert.deepEqual(description.searchAttributes.ReplyStatus, ['deciding']);
  });

  test('the same message under a new event id is a duplicate, decided by the intake row: 204, recorded as duplicate, one row, one run', async () => {
    const message = newMessage();
    const first = messageReceivedPayload(message);
    const again = messageReceivedPayload(message);
    for (const payload of [first, again]) {
      const body = JSON.stringify(payload);
      assert.equal((await post(body, signedHeaders(secret, body))).statusCode, 204);
    }
    assert.equal((await eventRow(first.event_id)).outcome, 'queued');
    assert.equal((await eventRow(again.event_id)).outcome, 'duplicate');
    assert.equal((await intakeRow(message)).first_event_id, first.event_id);
    await eventually(async () => ((await intakeRow(message)).started_at ? true : undefined), 'the start');
    const runs = await countRuns(inboundWorkflowId(message));
    assert.equal(runs, 1);
  });

  test('a retry that reaches another replica (it never saw the event) is decided by the same one statement: duplicate, one job', async () => {
    // Prepare: the first delivery of each event went to this replica.
    const other = await startIngressOnly({ bodyLimitBytes: 64 * 1024, webhookSecret: secret });
    try {
      const message = newMessage();
      const received = JSON.stringify(messageReceivedPayload(message));
      const delivered = JSON.stringify({
        type: 'event',
        event_type: 'message.delivered',
        event_id: `evt_${randomUUID()}`,
      });
      for (const body of [received, delivered])
        assert.equal((await post(body, signedHeaders(secret, body))).statusCode, 204);
      const duplicatesBefore = await outcomeCount('duplicate');

      // Act: the sender's retries land on the other replica.
      for (const body of [received, delivered]) {
        const response = await other.app.inject({
          method: 'POST',
          url: '/webhooks/agentmail',
          payload: body,
          headers: signedHeaders(secret, body),
        });
        assert.equal(response.statusCode, 204);
      }

      // Assess: both answered as duplicates; the rows are the first delivery's.
      assert.equal((await outcomeCount('duplicate')) - duplicatesBefore, 2);
      assert.equal((await eventRow(JSON.parse(received).event_id)).outcome, 'queued');
      assert.equal((await eventRow(JSON.parse(delivered).event_id)).outcome, 'ignored');
      assert.equal((await intakeRow(message)).first_event_id, JSON.parse(received).event_id);
      await eventually(async () => ((await intakeRow(message)).started_at ? true : undefined), 'the start');
      assert.equal(await countRuns(inboundWorkflowId(message)), 1);
    } finally {
      await other.close();
    }
  });

  test('other event types are acknowledged and recorded as ignored, starting nothing', async () => {
    const body = JSON.stringify({
      type: 'event',
      event_type: 'message.delivered',
      event_id: `evt_${randomUUID()}`,
      delivery: {},
    });
    const response = await post(body, signedHeaders(secret, body));
    assert.equal(response.statusCode, 204);
    assert.equal((await eventRow(JSON.parse(body).event_id)).outcome, 'ignored');
  });

  test('signed but unparseable or malformed payloads → 422, nothing recorded', async () => {
    const eventId = `evt_${randomUUID()}`;
    const bodies = [
      '{"event_type": "message.received", ',
      JSON.stringify({ event_type: 'message.received' }),
      JSON.stringify({ event_type: 'message.received', event_id: eventId }),
      JSON.stringify({ event_type: 'message.received', event_id: eventId, message: { inbox_id: 42 } }),
    ];
    for (const body of bodies) {
      const response = await post(body, signedHeaders(secret, body));
      assert.equal(response.statusCode, 422, body);
    }
    assert.equal(await eventRow(eventId), undefined);
  });

  test('a body over the limit → 413', async () => {
    const body = JSON.stringify({ ...messageReceivedPayload(newMessage()), padding: 'x'.repeat(70 * 1024) });
    const response = await post(body, signedHeaders(secret, body));
    assert.equal(response.statusCode, 413);
  });

  test('healthz answers; readyz is "Postgres reachable" (Temporal is not needed to accept a webhook)', async () => {
    assert.equal((await app.inject('/healthz')).statusCode, 200);
    const ready = await app.inject('/readyz');
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json().checks, { postgres: 'ok' });
  });
});

describe('the in-process start queue', () => {
  test('full: the row is due for the relay at once, which starts it within a couple of seconds', async () => {
    // Prepare: an ingress whose starter takes nothing (capacity 0), as under a burst.
    const full = await startIngressOnly({ bodyLimitBytes: 64 * 1024, intake: { starterOptions: { capacity: 0 } } });
    try {
      const message = newMessage();
      const payload = messageReceivedPayload(message);
      const body = JSON.stringify(payload);
      const before =
        (await intakeStarts.get()).values.find((v) => v.labels.by === 'relay' && v.labels.outcome === 'started')
          ?.value ?? 0;

      // Act
      const response = await full.app.inject({
        method: 'POST',
        url: '/webhooks/agentmail',
        payload: body,
        headers: signedHeaders(full.secret, body),
      });

      // Assess
      assert.equal(response.statusCode, 204);
      const acceptedAt = Date.now();
      await eventually(
        async () => ((await intakeRow(message)).started_at ? true : undefined),
        'the relay to start it',
        5_000,
      );
      assert.ok(Date.now() - acceptedAt < 3_000, `started ${Date.now() - acceptedAt} ms after the answer`);
      const after =
        (await intakeStarts.get()).values.find((v) => v.labels.by === 'relay' && v.labels.outcome === 'started')
          ?.value ?? 0;
      assert.equal(after - before, 1, 'the relay started it, not the starter');
    } finally {
      await full.close();
    }
  });
});

describe('message time', () => {
  test('a timestamp in the year 9999 is clamped to now: it does not move the cursor for good', async () => {
    const message = newMessage();
    const payload = messageReceivedPayload(message);
    const future = { ...payload, message: { ...payload.message, timestamp: '9999-12-31T23:59:59.000Z' } };
    const body = JSON.stringify(future);
    const before = Date.now();
    assert.equal((await post(body, signedHeaders(secret, body))).statusCode, 204);
    const clamped = await cursorOf(message.inboxId);
    assert.ok(clamped, 'the cursor moved, to now');
    assert.ok(clamped.getTime() >= before - 1_000 && clamped.getTime() <= Date.now() + 1_000, clamped.toISOString());
    assert.equal((await intakeRow(message)).message_at.toISOString(), clamped.toISOString());

    // A real message a minute later still moves it: the cursor was not pushed out of reach.
    const later = { ...newMessage(), inboxId: message.inboxId };
    const next = messageReceivedPayload(later);
    const nextAt = new Date(Date.now() + 60_000).toISOString();
    const nextBody = JSON.stringify({ ...next, message: { ...next.message, timestamp: nextAt } });
    assert.equal((await post(nextBody, signedHeaders(secret, nextBody))).statusCode, 204);
    assert.equal((await cursorOf(message.inboxId))?.toISOString(), nextAt);
  });
});

describe('ingress limits', () => {
  /** An ingress on a real port (timeouts are the HTTP server's, not inject's). */
  async function listening(options: { requestTimeoutMs?: number; maxConcurrentRequests?: number }) {
    const served = await startIngressOnly({ bodyLimitBytes: 64 * 1024, ...options });
    await served.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (served.app.server.address() as AddressInfo).port;
    return { ...served, port, url: `http://127.0.0.1:${port}` };
  }

  /** A client that sends its headers and then one byte of a 1,000-byte body every 200 ms. */
  function slowBody(port: number) {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let received = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    const closed = new Promise<number>((resolve) => {
      const openedAt = Date.now();
      socket.once('close', () => resolve(Date.now() - openedAt));
    });
    socket.write(
      'POST /webhooks/agentmail HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n',
    );
    const trickle = setInterval(() => socket.writable && socket.write('x'), 200);
    return {
      closed,
      response: () => received,
      end: () => {
        clearInterval(trickle);
        socket.destroy();
      },
    };
  }

  test('a client that trickles its body is cut off after the request timeout', async () => {
    const served = await listening({ requestTimeoutMs: 1_000 });
    const client = slowBody(served.port);
    try {
      const heldMs = await Promise.race([
        client.closed,
        new Promise<number>((resolve) => setTimeout(() => resolve(Number.POSITIVE_INFINITY), 10_000)),
      ]);
      assert.ok(heldMs < 4_000, `the socket was held ${heldMs} ms (request timeout 1 s)`);
      assert.match(client.response(), /^HTTP\/1\.1 408/, 'answered 408 Request Timeout');
    } finally {
      client.end();
      await served.close();
    }
  });

  test('past INGRESS_MAX_CONCURRENT_REQUESTS in flight → 503 with Retry-After (Svix retries it); probes still answer; then it recovers', async () => {
    const served = await listening({ requestTimeoutMs: 2_000, maxConcurrentRequests: 2 });
    const holders = [slowBody(served.port), slowBody(served.port)];
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const message = newMessage();
      const payload = messageReceivedPayload(message);
      const body = JSON.stringify(payload);
      const shed = await fetch(`${served.url}/webhooks/agentmail`, {
        method: 'POST',
        body,
        headers: signedHeaders(served.secret, body),
      });
      assert.equal(shed.status, 503);
      assert.equal(shed.headers.get('retry-after'), '1');
      assert.equal(await eventRow(payload.event_id), undefined, 'nothing recorded for a shed request');
      assert.equal((await fetch(`${served.url}/healthz`)).status, 200, 'probes are never shed');

      // The slow clients are cut off by the request timeout; the sender's retry then goes through.
      await Promise.all(holders.map((h) => h.closed));
      const retried = await fetch(`${served.url}/webhooks/agentmail`, {
        method: 'POST',
        body,
        headers: signedHeaders(served.secret, body),
      });
      assert.equal(retried.status, 204);
      assert.equal((await eventRow(payload.event_id)).outcome, 'queued');
    } finally {
      for (const holder of holders) holder.end();
      await served.close();
    }
  });
});

async function countRuns(workflowId: string): Promise<number> {
  let runs = 0;
  for await (const _ of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs += 1;
  return runs;
}

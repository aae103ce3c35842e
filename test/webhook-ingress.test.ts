import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import { startIngressOnly, type IngressOnly } from './support/ingress-only';
import { messageReceivedPayload, newWebhookSecret, signedHeaders } from './support/signing';
import { workflowExists } from './support/temporal';

// The ingress alone, against real Temporal and Postgres: no worker polls this task queue, so
// started workflows stay queued and the test sees exactly what the ingress did.
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
      assert.equal(await workflowExists(client, inboundWorkflowId(message)), false);
    });
  }
});

describe('webhook delivery', () => {
  test('a signed message.received starts the message workflow, then records the event as queued', async () => {
    const message = newMessage();
    const payload = messageReceivedPayload(message);
    const body = JSON.stringify(payload);
    const response = await post(body, signedHeaders(secret, body));
    assert.equal(response.statusCode, 204);
    assert.equal(await workflowExists(client, inboundWorkflowId(message)), true);
    const row = await eventRow(payload.event_id);
    assert.equal(row.outcome, 'queued');
    assert.equal(row.workflow_id, inboundWorkflowId(message));
    const description = await client.workflow.getHandle(inboundWorkflowId(message)).describe();
    assert.equal(description.type, 'inboundMessageWorkflow');
    assert.deepEqual(description.searchAttributes.MessageId, [message.messageId]);
    assert.deepEqual(description.searchAttributes.InboxId, [message.inboxId]);
  });

  test('the same message under a new event id is a duplicate: 204, recorded as duplicate, one workflow run', async () => {
    const message = newMessage();
    const first = messageReceivedPayload(message);
    const again = messageReceivedPayload(message);
    for (const payload of [first, again]) {
      const body = JSON.stringify(payload);
      assert.equal((await post(body, signedHeaders(secret, body))).statusCode, 204);
    }
    assert.equal((await eventRow(first.event_id)).outcome, 'queued');
    assert.equal((await eventRow(again.event_id)).outcome, 'duplicate');
    const runs = await countRuns(inboundWorkflowId(message));
    assert.equal(runs, 1);
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

  test('healthz answers; readyz reports Postgres and Temporal reachable', async () => {
    assert.equal((await app.inject('/healthz')).statusCode, 200);
    const ready = await app.inject('/readyz');
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json().checks, { postgres: 'ok', temporal: 'ok' });
  });
});

async function countRuns(workflowId: string): Promise<number> {
  let runs = 0;
  for await (const _ of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs += 1;
  return runs;
}

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { BASELINE_TABLE, baselineSchemaSql, createBaselineApp } from '../bench/baseline/app';
import { parseOptions } from '../bench/options';
import { summarizeResults, type BenchResults } from '../bench/report';
import type { ServerFigures } from '../bench/scenarios/temporal-servers';
import { bodiesLike } from '../bench/support/deliveries';
import { runClosedLoop, runOpenLoop } from '../bench/support/load';
import { median, percentileOfSorted } from '../bench/support/stats';
import { inboundWorkflowId } from '../lib/hashing';
import { freePort } from '../scripts/services/ports';
import { testEnv } from './support/env';
import { connectClient, eventually } from './support/temporal';
import { messageReceivedPayload, newWebhookSecret, signedHeaders } from './support/signing';

// The bench's reference must be a real handler, not a straw man that accepts anything: it
// verifies Svix signatures and dedupes on event_id. And the load generator must count what the
// server answered. No timings are asserted here: figures belong to `npm run bench`.
const secret = newWebhookSecret();
let pool: pg.Pool;
let server: Server;
let origin: string;

before(async () => {
  pool = new pg.Pool({ connectionString: testEnv.databaseUrl, max: 4 });
  await pool.query(baselineSchemaSql);
  server = createBaselineApp({ pool, webhookSecret: secret }).listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
  await pool.end();
});

const post = (body: string, headers: Record<string, string>) =>
  fetch(`${origin}/webhooks/agentmail`, { method: 'POST', headers, body });
const rowsFor = async (eventId: string) =>
  Number((await pool.query(`SELECT count(*) AS n FROM ${BASELINE_TABLE} WHERE event_id = $1`, [eventId])).rows[0].n);

describe('the baseline handler', () => {
  test('records a signed event once, however often it is delivered', async () => {
    // Prepare
    const eventId = `evt_${randomUUID()}`;
    const body = JSON.stringify(
      messageReceivedPayload({ eventId, inboxId: 'support@example.com', messageId: `<${randomUUID()}@example.com>` }),
    );

    // Act
    const first = await post(body, signedHeaders(secret, body));
    const again = await post(body, signedHeaders(secret, body));

    // Assess
    assert.equal(first.status, 204);
    assert.equal(again.status, 204);
    assert.equal(await rowsFor(eventId), 1);
  });

  test('refuses unsigned, tampered and wrongly signed deliveries and records nothing', async () => {
    const eventId = `evt_${randomUUID()}`;
    const body = JSON.stringify(
      messageReceivedPayload({ eventId, inboxId: 'support@example.com', messageId: `<${randomUUID()}@example.com>` }),
    );

    const unsigned = await post(body, { 'content-type': 'application/json' });
    const tampered = await post(body.replace('Where is my order?', 'Refund me twice'), signedHeaders(secret, body));
    const otherSecret = await post(body, signedHeaders(newWebhookSecret(), body));

    assert.deepEqual([unsigned.status, tampered.status, otherSecret.status], [400, 400, 400]);
    assert.equal(await rowsFor(eventId), 0);
  });
});

describe('the load generator', () => {
  test('sends every delivery once and counts the answers by status, open and closed loop', async () => {
    // Prepare: three new events and one bad signature, twice over.
    const template = { eventId: `evt_${randomUUID()}`, messageId: `<${randomUUID()}@example.com>` };
    const body = JSON.stringify(
      messageReceivedPayload({
        eventId: template.eventId,
        inboxId: 'support@example.com',
        messageId: template.messageId,
      }),
    );
    const bodies = bodiesLike({ ...template, inboxId: 'support@example.com', body }, 3);
    const deliveries = [
      ...bodies.map((b) => ({ body: b, headers: signedHeaders(secret, b) })),
      { body, headers: { 'content-type': 'application/json' } },
    ];

    // Act
    const open = await runOpenLoop({ origin, path: '/webhooks/agentmail' }, deliveries, {
      rate: 200,
      connections: 4,
      maxDurationMs: 10_000,
    });
    const closed = await runClosedLoop({ origin, path: '/webhooks/agentmail' }, deliveries, {
      concurrency: 2,
      maxDurationMs: 10_000,
    });

    // Assess: same-size bodies with new ids are new events; the unsigned one is refused each time.
    assert.equal(new Set(bodies.map((b) => b.length)).size, 1);
    assert.equal(bodies[0]?.length, body.length);
    for (const result of [open, closed]) {
      assert.equal(result.sent, 4);
      assert.equal(result.ok, 3);
      assert.deepEqual(result.statuses, { '204': 3, '400': 1 });
      assert.equal(result.latencies.length, 4);
      assert.equal(result.truncated, false);
    }
    for (const b of bodies) assert.equal(await rowsFor(JSON.parse(b).event_id as string), 1);
  });
});

describe('the statistics', () => {
  test('percentiles are nearest-rank and medians of repeats ignore missing figures', () => {
    const sorted = Float64Array.from({ length: 1000 }, (_, i) => i + 1);
    assert.equal(percentileOfSorted(sorted, 50), 500);
    assert.equal(percentileOfSorted(sorted, 99), 990);
    assert.equal(percentileOfSorted(sorted, 99.9), 999);
    assert.equal(median([5, 1, 3]), 3);
    assert.equal(median([4, Number.NaN, 1, 3, 2]), 2.5);
  });
});

describe('the two Temporal servers side by side (--temporal both)', () => {
  test('is its own scenario, the default with --temporal both, and refused without it', () => {
    assert.deepEqual([...parseOptions(['--temporal', 'both']).only], ['servers']);
    assert.deepEqual(
      [...parseOptions(['--temporal', 'both', '--only', 'ingress,servers']).only],
      ['ingress', 'servers'],
    );
    assert.ok(!parseOptions([]).only.has('servers'));
    assert.throws(() => parseOptions(['--only', 'servers']), /add --temporal both/);
    assert.throws(() => parseOptions(['--temporal', 'cloud']), /dev, stack or both/);
  });

  test("summarizes each server over its own repeats, Temporal CPU including the stack's Postgres backends", () => {
    const ladder = (maxSustained: number) => ({
      side: 'ours' as const,
      worker: true,
      repeat: 0,
      maxSustained,
      capped: false,
      steps: [],
    });
    const drain = (p50: number, temporal: number, postgres?: number) =>
      ({
        load: '1×',
        messages: 62,
        replies: 62,
        duplicateEmails: 0,
        drainSeconds: 10,
        throughput: 6.2,
        latency: { p50, p99: p50 * 2 },
        cpuMsPerMessage: { temporal, ...(postgres === undefined ? {} : { 'temporal postgres': postgres }) },
      }) as unknown as ServerFigures['endToEnd'][number];
    const servers: ServerFigures[] = [
      { server: 'dev', repeat: 0, startOnly: ladder(300), ours: ladder(200), endToEnd: [drain(80, 40)] },
      { server: 'stack', repeat: 0, startOnly: ladder(140), ours: ladder(30), endToEnd: [drain(120, 50, 20)] },
      { server: 'dev', repeat: 1, startOnly: ladder(320), ours: ladder(210), endToEnd: [drain(90, 42)] },
      { server: 'stack', repeat: 1, startOnly: ladder(150), ours: ladder(26), endToEnd: [drain(100, 52, 22)] },
    ];
    const summary = summarizeResults({
      options: parseOptions(['--temporal', 'both']),
      servers,
      failures: [],
    } as unknown as BenchResults);
    assert.deepEqual(summary.servers?.dev.startOnly.runs, [300, 320]);
    assert.equal(summary.servers?.dev.startOnly.median, 310);
    assert.equal(summary.servers?.stack.ours.median, 28);
    assert.equal(summary.servers?.stack.endToEnd[0]?.p50, 110);
    assert.equal(summary.servers?.stack.endToEnd[0]?.temporalCpuMs, 72);
    assert.equal(summary.servers?.dev.endToEnd[0]?.temporalCpuMs, 41);
  });
});

describe('the start-only reference (the Temporal start alone)', () => {
  test('starts the workflow our ingress starts, once per message, and refuses a body it cannot read', async () => {
    const port = await freePort();
    const server = spawn(process.execPath, ['--import', 'tsx', 'bench/baseline/start-only.ts'], {
      env: { ...process.env, PORT: String(port), TEMPORAL_TASK_QUEUE: `start-only-${randomUUID().slice(0, 8)}` },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const { client, connection } = await connectClient();
    try {
      let output = '';
      server.stdout.setEncoding('utf8');
      for await (const chunk of server.stdout) if ((output += chunk as string).includes('start-only listening')) break;
      const ref = { inboxId: 'support@example.com', messageId: `<${randomUUID()}@example.com>` };
      const body = JSON.stringify(messageReceivedPayload({ eventId: `evt_${randomUUID()}`, ...ref }));
      const post = (text: string) =>
        fetch(`http://127.0.0.1:${port}/webhooks/agentmail`, { method: 'POST', body: text });

      assert.equal((await post(body)).status, 204);
      assert.equal((await post(body)).status, 204, 'a second delivery attaches to the same workflow');
      assert.equal((await post('not json')).status, 400);

      const description = await client.workflow.getHandle(inboundWorkflowId(ref)).describe();
      assert.deepEqual(
        [description.searchAttributes.MessageId, description.searchAttributes.ReplyStatus],
        [[ref.messageId], ['deciding']],
      );
      // Visibility is written after the start: wait for the run to show, then count.
      const runs = await eventually(async () => {
        let count = 0;
        for await (const _ of client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(ref)}'` })) count += 1;
        return count > 0 ? count : undefined;
      }, 'the run to be listed');
      assert.equal(runs, 1);
    } finally {
      server.kill('SIGTERM');
      await once(server, 'exit');
      await connection.close();
    }
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { IntakeStore, type DeadLetterPolicy } from '../intake/intake-store';
import { IntakeRelay, RELAY_DEFAULTS, type RelayOptions } from '../intake/relay';
import { createDb } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../contract';
import type { Logger } from '../lib/logger';
import { testEnv } from './support/env';
import { runReplayCli } from './support/replay-cli';
import { Harness } from './support/harness';
import { TcpProxy } from './support/tcp-proxy';
import { eventually } from './support/temporal';

// The intake relay on real parts (issue 18 points 7–8): each row keeps its own backoff; only a
// recovery after Temporal was unreachable brings rows forward, a batch at a time; a row Temporal
// keeps refusing goes to the dead letter, which /metrics counts and `npm run replay -- --stuck`
// lists and retries. The harness's API runs no relay: each test builds the relay it watches.
let h: Harness;
before(async () => {
  h = await Harness.start({ relay: false });
});
after(() => h.close());

function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

function relayOn(
  client: Client,
  options: Partial<RelayOptions> = {},
  deadLetter?: DeadLetterPolicy,
): { relay: IntakeRelay; lines: Array<Record<string, unknown>> } {
  const sink = capturingLogger();
  const relay = new IntakeRelay(
    {
      db: h.db,
      temporal: client,
      taskQueue: h.taskQueue,
      logger: sink.logger,
      store: new IntakeStore(h.db, h.taskQueue, deadLetter),
    },
    { ...RELAY_DEFAULTS, pollMs: 100, startTimeoutMs: 1_000, ...options },
  );
  return { relay, lines: sink.lines };
}

/** Intake rows as a catch-up hands them over (due at once), for messages the sandbox holds. */
async function handOver(inboxId: string, count: number, threadId?: string): Promise<MessageRef[]> {
  const refs: MessageRef[] = [];
  for (let i = 0; i < count; i += 1) {
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `relay-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Hello',
      text: 'Hello there.',
      deliver: false,
    });
    refs.push({ inboxId, messageId: inbound.message.message_id });
  }
  await new IntakeStore(h.db, h.taskQueue).acceptBatch(
    inboxId,
    refs.map((r) => ({ ...r, ...(threadId ? { threadId } : {}) })),
    undefined,
  );
  return refs;
}

interface Row {
  attempts: number;
  refusals: number;
  next_in_ms: number;
  last_start_error: string | null;
  started_at: Date | null;
  dead_at: Date | null;
}
const row = async (ref: MessageRef): Promise<Row> =>
  (
    await h.db.query<Row>(
      `SELECT attempts, refusals, last_start_error, started_at, dead_at,
              (EXTRACT(EPOCH FROM next_attempt_at - now()) * 1000)::float8 AS next_in_ms
         FROM intake WHERE workflow_id = $1`,
      [inboundWorkflowId(ref)],
    )
  ).rows[0] as Row;

/**
 * A thread id Temporal refuses as a search attribute (over its 2 KB per value: 998 three-byte
 * characters), which the intake's own 998-character check lets through: a real refusal, per row.
 */
const REFUSED_THREAD = '€'.repeat(998);

describe('backoff per row (point 7)', () => {
  test('a start Temporal refuses keeps its own backoff: other rows starting fine do not bring it forward', async () => {
    const { relay, lines } = relayOn(h.client);
    const inboxId = h.newInbox();
    const [poison] = await handOver(inboxId, 1, REFUSED_THREAD);
    relay.start();
    try {
      await eventually(
        async () => ((await row(poison!)).attempts >= 1 ? true : undefined),
        'the refused start to be recorded',
      );
      const refused = await row(poison!);
      assert.equal(refused.last_start_error, 'INVALID_ARGUMENT', 'the error class only, never its message');
      assert.equal(refused.refusals, 1);
      // Its backoff has grown (as after many refusals): far in the future.
      await h.db.query(
        `UPDATE intake SET attempts = 8, next_attempt_at = now() + interval '60 seconds' WHERE workflow_id = $1`,
        [inboundWorkflowId(poison!)],
      );

      // Act: healthy rows arrive and start.
      const healthy = await handOver(inboxId, 3);
      for (const ref of healthy)
        await eventually(async () => ((await row(ref)).started_at ? true : undefined), 'a healthy row to start');
      await new Promise((resolve) => setTimeout(resolve, 1_500));

      // Assess: the refused row was not made due by their success.
      const after = await row(poison!);
      assert.equal(after.attempts, 8, 'not tried again');
      assert.ok(after.next_in_ms > 50_000, `still backing off (${Math.round(after.next_in_ms)} ms left)`);
      assert.equal(lines.filter((l) => String(l.msg).includes('due now')).length, 0, 'nothing brought forward');
      assert.ok(
        lines.every((l) => !JSON.stringify(l).includes('€€€')),
        'no line repeats what Temporal was sent',
      );
    } finally {
      await relay.close();
    }
  });

  test('Temporal unreachable, then back: the rows that could not reach it come forward in batches, and every one starts once', async () => {
    const proxy = await TcpProxy.start(testEnv.temporalAddress);
    const connection = Connection.lazy({ address: proxy.address, connectTimeout: 1_000 });
    const client = new Client({ connection, namespace: testEnv.namespace });
    const { relay, lines } = relayOn(client, { batchSize: 2, startTimeoutMs: 500 });
    try {
      const inboxId = h.newInbox();
      proxy.cut();
      const refs = await handOver(inboxId, 5);
      relay.start();
      for (const ref of refs)
        await eventually(
          async () => ((await row(ref)).attempts >= 1 ? true : undefined),
          'each start to fail against the cut connection',
        );
      for (const ref of refs) {
        const failed = await row(ref);
        assert.match(String(failed.last_start_error), /^(UNAVAILABLE|DEADLINE_EXCEEDED|CANCELLED)$/);
        assert.equal(failed.refusals, 0, 'unreachable is not a refusal');
      }
      // Their backoffs, far out: only the recovery can bring them forward in this test's time.
      await h.db.query(
        `UPDATE intake SET next_attempt_at = now() + interval '10 minutes' WHERE workflow_id = ANY($1::text[])`,
        [refs.map((r) => inboundWorkflowId(r))],
      );

      // Act: Temporal is reachable again, and a new row starts (the evidence).
      proxy.restore();
      const [fresh] = await handOver(inboxId, 1);
      for (const ref of [fresh!, ...refs])
        await eventually(async () => ((await row(ref)).started_at ? true : undefined), 'every row to start', 30_000);

      // Assess: brought forward a batch (2) at a time, each row started once.
      const forward = lines.filter((l) => String(l.msg).includes('due now')).map((l) => l.rows as number);
      assert.ok(forward.length >= 3, `batches: ${forward.join(', ')}`);
      assert.ok(
        forward.every((n) => n <= 2),
        `no batch larger than the relay's: ${forward.join(', ')}`,
      );
      for (const ref of refs) {
        let runs = 0;
        for await (const _ of h.client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(ref)}'` })) runs += 1;
        assert.equal(runs, 1);
      }
    } finally {
      await relay.close();
      await connection.close();
      await proxy.close();
    }
  });

  test('Postgres unreachable (DATABASE_URL): one warning line per try, naming the variable, no stack, tries backing off', async () => {
    const sink = capturingLogger();
    const db = createDb('postgres://replyonce:nothing@127.0.0.1:1/replyonce', { connectTimeoutMs: 500 });
    const relay = new IntakeRelay(
      { db, temporal: h.client, taskQueue: h.taskQueue, logger: sink.logger },
      { ...RELAY_DEFAULTS, pollMs: 100 },
    );
    relay.start();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await relay.close();
    await db.end();
    const warnings = sink.lines.filter((l) => l.level === 40);
    assert.ok(warnings.length >= 2, `${warnings.length} warnings`);
    // 100, 200, 400, 800, 1600 ms: at most six tries in three seconds (thirty at a fixed 100 ms).
    assert.ok(warnings.length <= 6, `${warnings.length} warnings in 3 s: the tries back off`);
    for (const line of warnings) {
      assert.match(String(line.msg), /cannot reach Postgres \(DATABASE_URL\): ECONNREFUSED/);
      assert.equal(line.err, undefined, 'no stack trace');
    }
  });
});

describe('the dead letter (point 8)', () => {
  test('refused N times → dead: counted on /metrics, listed by `npm run replay -- --stuck`, retried by --retry-stuck; rows of another task queue are counted too', async () => {
    const { relay } = relayOn(h.client, {}, { afterRefusals: 2, afterMs: 24 * 60 * 60_000 });
    const inboxId = h.newInbox();
    const [poison] = await handOver(inboxId, 1, REFUSED_THREAD);
    const otherQueue = `renamed-${randomUUID()}`;
    const [orphan] = await handOver(inboxId, 1);
    await h.db.query('UPDATE intake SET task_queue = $2 WHERE workflow_id = $1', [
      inboundWorkflowId(orphan!),
      otherQueue,
    ]);
    relay.start();
    try {
      // Act: two refusals (the second after its backoff, made due here rather than waited out).
      await eventually(async () => ((await row(poison!)).refusals >= 1 ? true : undefined), 'the first refusal');
      await h.db.query('UPDATE intake SET next_attempt_at = now() WHERE workflow_id = $1', [
        inboundWorkflowId(poison!),
      ]);
      const dead = await eventually(
        async () => ((await row(poison!)).dead_at ? await row(poison!) : undefined),
        'the row to move to the dead letter',
      );
      assert.equal(dead.refusals, 2);
      assert.equal(dead.last_start_error, 'INVALID_ARGUMENT');
      await h.db.query('UPDATE intake SET next_attempt_at = now() WHERE workflow_id = $1', [
        inboundWorkflowId(poison!),
      ]);
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal((await row(poison!)).attempts, 2, 'the relay no longer tries a dead row');

      // Assess: counted by state on the API's /metrics (its task queue is this harness's).
      const metrics = await (await fetch(h.metricsUrl)).text();
      assert.match(metrics, /^replyonce_intake_backlog\{state="dead"\} [1-9]\d*$/m);
      assert.match(metrics, /^replyonce_intake_backlog\{state="other_queue"\} [1-9]\d*$/m);

      const stuck = runReplayCli(h, ['--stuck']);
      assert.equal(stuck.code, 0, stuck.output);
      assert.match(stuck.output, new RegExp(`${inboundWorkflowId(poison!)}.*dead.*INVALID_ARGUMENT`));
      assert.doesNotMatch(stuck.output, /€/, 'ids and an error class only');
      assert.match(stuck.output, /belong to another TEMPORAL_TASK_QUEUE/);
      const all = runReplayCli(h, ['--stuck', '--all-queues']);
      assert.match(all.output, new RegExp(`${inboundWorkflowId(orphan!)}.*task queue ${otherQueue}`));

      const retried = runReplayCli(h, ['--retry-stuck']);
      assert.equal(retried.code, 0, retried.output);
      assert.match(retried.output, /1 row\(s\) given back/);
      const back = await row(poison!);
      assert.equal(back.dead_at, null);
      assert.equal(back.refusals, 0);
      // It is tried again (and refused again: a person fixes the cause, then retries).
      await eventually(
        async () => ((await row(poison!)).attempts >= 3 ? true : undefined),
        'the relay to try it again',
      );
    } finally {
      await relay.close();
    }
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createCatchUp } from '../intake/intake';
import { IntakeStore } from '../intake/intake-store';
import { inboundWorkflowId } from '../lib/hashing';
import { decisionKey, draftKey, type InboundMessageResult, type MessageRef, replyKey } from '../contract';
import { testEnv } from './support/env';
import { runReplayCli } from './support/replay-cli';
import { Harness } from './support/harness';
import { startWorker } from './support/worker';
import { AppProcess } from './support/app-process';
import { eventually } from './support/temporal';

// The README's two manual replays, typed as a person would (`npm run temporal -- workflow start …`,
// the cached Temporal CLI through scripts/temporal), against the suite's Temporal: a start of an
// answered message with AllowDuplicateFailedOnly runs nothing (it prints the old run and exits 0);
// AllowDuplicate runs it again and every effect replays from the operation store (one email); a
// workflow that did not complete is rerun with AllowDuplicateFailedOnly.
let h: Harness;
before(async () => {
  h = await Harness.start();
});
after(() => h.close());

const repoRoot = path.resolve(__dirname, '..');

function temporalStart(ref: MessageRef, reusePolicy: string) {
  const run = spawnSync(
    'bash',
    [
      path.join(repoRoot, 'scripts', 'temporal'),
      'workflow',
      'start',
      '--task-queue',
      h.taskQueue,
      '--type',
      'inboundMessageWorkflow',
      '--workflow-id',
      inboundWorkflowId(ref),
      '--id-reuse-policy',
      reusePolicy,
      '--input',
      JSON.stringify(ref),
    ],
    {
      encoding: 'utf8',
      env: { ...process.env, TEMPORAL_ADDRESS: testEnv.temporalAddress, TEMPORAL_NAMESPACE: testEnv.namespace },
    },
  );
  return { code: run.status, output: `${run.stdout}${run.stderr}` };
}

async function runIds(ref: MessageRef): Promise<string[]> {
  const ids: string[] = [];
  for await (const run of h.client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(ref)}'` }))
    ids.push(run.runId);
  return ids;
}

const mail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'Again?',
  text: 'Answer me once.',
});

describe('manual replays (README, "Finding a message")', () => {
  test('an answered message: AllowDuplicateFailedOnly prints the OLD run and exits 0 (nothing ran); AllowDuplicate runs it again and every effect replays: one email', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const first = await h.resultOf(ref);
    assert.equal(first.status, 'sent');

    const [firstRunId] = await runIds(ref);
    // The trap the README warns about: success, and the run it names is the one that already answered.
    const noop = temporalStart(ref, 'AllowDuplicateFailedOnly');
    assert.equal(noop.code, 0, noop.output);
    assert.equal(/RunId\s+(\S+)/.exec(noop.output)?.[1], firstRunId, noop.output);
    assert.equal((await runIds(ref)).length, 1, 'nothing new ran');

    const rerun = temporalStart(ref, 'AllowDuplicate');
    assert.equal(rerun.code, 0, rerun.output);
    const runId = /RunId\s+(\S+)/.exec(rerun.output)?.[1];
    assert.ok(runId && runId !== firstRunId, rerun.output);
    const second: InboundMessageResult = await h.client.workflow.getHandle(inboundWorkflowId(ref), runId).result();
    assert.equal(second.status === 'sent' && second.replayed, true, 'every effect replayed from the store');
    assert.equal(second.status === 'sent' && first.status === 'sent' && second.replyMessageId, first.replyMessageId);
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
  });

  test('a workflow that did not complete (terminated mid-send): AllowDuplicateFailedOnly runs it again; the send resumes under its key: one email', async () => {
    const inboxId = h.newInbox();
    // The first send is held at the sandbox for 5 s: the run is terminated while it is in flight.
    await h.sandbox.setFaults({ match: { method: 'POST', path: '/reply', count: 1 }, action: 'delay', ms: 5_000 });
    try {
      const inbound = await h.sandbox.inbound(mail(inboxId));
      const ref = { inboxId, messageId: inbound.message.message_id };
      await eventually(
        async () =>
          (
            await h.db.query<{ status: string }>('SELECT status FROM operations WHERE operation_key = $1', [
              replyKey(ref),
            ])
          ).rows[0]?.status === 'processing'
            ? true
            : undefined,
        'the send to be in flight',
      );
      await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('operator: testing a rerun');

      const rerun = temporalStart(ref, 'AllowDuplicateFailedOnly');
      assert.equal(rerun.code, 0, rerun.output);
      const result = await h.workflowResult(ref, 30_000);
      assert.equal(result.status, 'sent');
      assert.equal((await runIds(ref)).length, 2);
      assert.equal((await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
    } finally {
      await h.sandbox.clearFaults();
    }
  });
});

describe('a run a person stopped stays stopped (issue 18, point 1)', () => {
  test('terminated while waiting: the catch-up leaves it out ("stopped by an operator"), the relay does not start it, /admin/replay neither; `npm run replay -- --rerun` does, on purpose', async () => {
    // Prepare: a message whose run is held at its first AgentMail read, terminated there by a
    // person (a customer answered by hand), and whose intake row is pruned (7 days).
    const inboxId = h.newInbox();
    // (The decision reads the message through its thread when the ingress named it, else by itself.)
    await h.sandbox.setFaults({
      match: { method: 'GET', path: /\/inboxes\/[^/]+\/(messages|threads)\//, count: 1 },
      action: 'delay',
      ms: 4_000,
    });
    const inbound = await h.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const workflowId = inboundWorkflowId(ref);
    await eventually(async () => ((await runIds(ref)).length === 1 ? true : undefined), 'the run to start');
    await h.client.workflow.getHandle(workflowId).terminate('operator: the customer was answered by hand');
    await h.sandbox.clearFaults();
    await h.db.query('DELETE FROM intake WHERE workflow_id = $1', [workflowId]);
    const since = new Date(Date.now() - 60_000);

    // Act 1: the catch-up (as `npm run replay`, /admin/replay and the watchdog run it).
    const summary = await createCatchUp({
      db: h.db,
      agentmail: h.agentmail,
      taskQueue: h.taskQueue,
      operationRetentionDays: 90,
      temporal: h.client,
    }).run({ inboxId, since });
    assert.equal(summary.stoppedByOperator, 1, JSON.stringify(summary));
    assert.equal(summary.handedOver, 0);
    assert.equal(await h.intakeRow(ref), undefined, 'no row made for it');

    // Act 2: a row that reaches the relay anyway (a catch-up that could not ask Temporal).
    await new IntakeStore(h.db, h.taskQueue).acceptBatch(inboxId, [ref], undefined);
    await eventually(
      async () => ((await h.intakeRow(ref))?.started_at ? true : undefined),
      'the relay to handle the row',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal((await runIds(ref)).length, 1, 'no second run: a terminated run is not a failed one');
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 0, 'nothing sent');

    // Act 3: the operator's explicit rerun of this one message.
    const rerun = runReplayCli(h, ['--rerun', inboxId, ref.messageId]);
    assert.equal(rerun.code, 0, rerun.output);
    assert.match(rerun.output, /rerun started: .*the last run terminated/);
    const result = await h.client.workflow.getHandle(workflowId).result();
    assert.equal(result.status, 'sent');
    assert.equal((await runIds(ref)).length, 2);
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
  });
});

describe('a replay needs nothing but the store (issue 18, point 3)', () => {
  test('an answered message AgentMail no longer has: `npm run replay -- --rerun` ends sent, replayed, one email', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const first = await h.resultOf(ref);
    assert.equal(first.status, 'sent');
    // AgentMail forgot it (the dev sandbox restarted, or the message was deleted): every read of it is a 404.
    await h.sandbox.setFaults({
      match: { path: `/messages/${ref.messageId}` },
      action: 'status',
      status: 404,
      message: '{"name":"NotFoundError","message":"Message not found"}',
    });
    try {
      const rerun = runReplayCli(h, ['--rerun', inboxId, ref.messageId]);
      assert.equal(rerun.code, 0, rerun.output);
      const runId = /, run ([0-9a-f-]+)/.exec(rerun.output)?.[1];
      assert.ok(runId, rerun.output);
      const second: InboundMessageResult = await h.client.workflow.getHandle(inboundWorkflowId(ref), runId).result();
      assert.equal(second.status, 'sent');
      assert.equal(second.status === 'sent' && second.replayed, true, 'the send replayed from the store');
      assert.equal((await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
    } finally {
      await h.sandbox.clearFaults();
    }
  });
});

describe('the documented manual replay needs nothing but the store (issue 39, point 6)', () => {
  let h3: Harness;
  const workers: AppProcess[] = [];
  before(async () => {
    h3 = await Harness.start({ worker: false });
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await h3.close();
  });
  /** A worker process of its own: nothing it read before (its read caches start empty). */
  const freshWorker = async () => {
    const worker = await AppProcess.startWorker(h3);
    workers.push(worker);
    return worker;
  };

  test('`npm run temporal -- workflow start … --id-reuse-policy AllowDuplicate --input …`, typed as docs/operations.md prints it, on an answered message AgentMail no longer has: sent, replayed, one email', async () => {
    // Prepare: a message answered by one worker, which then stops.
    const first = await freshWorker();
    const inboxId = h3.newInbox();
    const inbound = await h3.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const answered = await h3.resultOf(ref);
    assert.equal(answered.status, 'sent');
    await first.stop();
    // AgentMail forgot the message and its thread (deleted; the dev sandbox restarted): every read is a 404.
    const notFound = {
      action: 'status' as const,
      status: 404,
      message: '{"name":"NotFoundError","message":"Not found"}',
    };
    await h3.sandbox.setFaults([
      { match: { path: `/messages/${ref.messageId}` }, ...notFound },
      { match: { path: `/threads/${inbound.message.thread_id}` }, ...notFound },
    ]);
    try {
      // A worker that never read it: past any cache.
      await freshWorker();
      // Act: the command exactly as docs/operations.md prints it (its `…` filled in).
      const workflowId = inboundWorkflowId(ref);
      const typed = spawnSync(
        'npm',
        [
          'run',
          'temporal',
          '--',
          'workflow',
          'start',
          '--task-queue',
          h3.taskQueue,
          '--type',
          'inboundMessageWorkflow',
          '--workflow-id',
          workflowId,
          '--id-reuse-policy',
          'AllowDuplicate',
          '--input',
          JSON.stringify({ inboxId: ref.inboxId, messageId: ref.messageId }),
        ],
        {
          cwd: repoRoot,
          encoding: 'utf8',
          env: { ...process.env, TEMPORAL_ADDRESS: testEnv.temporalAddress, TEMPORAL_NAMESPACE: testEnv.namespace },
        },
      );
      const output = `${typed.stdout}${typed.stderr}`;
      assert.equal(typed.status, 0, output);
      const runId = /RunId\s+(\S+)/.exec(output)?.[1];
      assert.ok(runId, output);
      // Assess: the run ends sent, every effect replayed from the store; no second email.
      const second: InboundMessageResult = await h3.client.workflow.getHandle(workflowId, runId).result();
      assert.equal(second.status, 'sent');
      assert.equal(second.status === 'sent' && second.replayed, true, 'the send replayed from the store');
      assert.equal(
        second.status === 'sent' && answered.status === 'sent' && second.replyMessageId,
        answered.status === 'sent' && answered.replyMessageId,
      );
      assert.equal((await h3.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
    } finally {
      await h3.sandbox.clearFaults();
    }
  });
});

describe('a new run decides again what depends on time and configuration (issue 18, point 2)', () => {
  let h2: Harness;
  before(async () => {
    h2 = await Harness.start({ worker: false });
  });
  after(() => h2.close());

  /** A worker on the harness's task queue with this configuration (as after a redeploy with new settings). */
  const workerWith = (overrides: Parameters<typeof startWorker>[1]) => startWorker(h2, overrides);

  const status = async (workflowId: string) =>
    (await h2.client.workflow.getHandle(workflowId).describe()).searchAttributes.ReplyStatus?.[0];
  const rerun = (ref: MessageRef) =>
    h2.client.workflow.start('inboundMessageWorkflow', {
      taskQueue: h2.taskQueue,
      workflowId: inboundWorkflowId(ref),
      args: [ref],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });

  test('a message whose first run stopped before sending: rerun after APPROVAL_REQUIRED_INBOXES=* → waits for approval; rerun after REPLY_MAX_AGE passed → too-old; keys unchanged, nothing sent', async () => {
    // Prepare: the first run (no approval configured) decides to reply, then stops mid-draft.
    let stop = await workerWith({});
    const inboxId = h2.newInbox();
    // The turn reads the thread first and goes through; every later read (the draft's, and its
    // retries) is held past the client's 5 s timeout: the draft stays in flight.
    await h2.sandbox.setFaults([
      { match: { method: 'GET', path: '/threads/', count: 1 }, action: 'delay', ms: 0 },
      { match: { method: 'GET', path: '/threads/', count: 10 }, action: 'delay', ms: 5_000 },
    ]);
    const inbound = await h2.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const workflowId = inboundWorkflowId(ref);
    const op = async (key: string) =>
      (await h2.db.query<{ status: string }>('SELECT status FROM operations WHERE operation_key = $1', [key])).rows[0]
        ?.status;
    try {
      await eventually(
        async () => ((await op(draftKey(ref))) === 'processing' ? true : undefined),
        'the draft to be in flight',
      );
      assert.equal(await op(decisionKey(ref)), 'complete', 'decided: reply, no approval');
      await h2.client.workflow.getHandle(workflowId).terminate('operator: hold on');
    } finally {
      // A worker left running (its run retrying a held read) would keep this file alive for minutes.
      await stop();
      await h2.sandbox.clearFaults();
    }

    // Act 1: approval is now required everywhere; the operator reruns the message.
    stop = await workerWith({ APPROVAL_REQUIRED_INBOXES: ['*'] });
    try {
      await rerun(ref);
      await eventually(
        async () => (['awaiting_approval', 'escalated'].includes(String(await status(workflowId))) ? true : undefined),
        'the rerun to wait for approval',
      );
      assert.equal((await h2.sandbox.outbox({ inbox_id: inboxId })).length, 0, 'nothing sent without a verdict');
      await h2.client.workflow.getHandle(workflowId).terminate('operator: not yet');
    } finally {
      await stop();
    }

    // Act 2: the message is now older than REPLY_MAX_AGE.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    stop = await workerWith({ REPLY_MAX_AGE: 1_000 });
    try {
      const result = await (await rerun(ref)).result();
      assert.deepEqual([result.status, result.status === 'skipped' && result.reason], ['skipped', 'too-old']);
      const reservation = await h2.db.query<{ released_at: Date | null }>(
        'SELECT released_at FROM reply_reservations WHERE reply_key = $1',
        [replyKey(ref)],
      );
      assert.notEqual(reservation.rows[0]?.released_at ?? null, null, "the first decision's reservation is given back");
    } finally {
      await stop();
    }
    assert.equal((await h2.sandbox.outbox({ inbox_id: inboxId })).length, 0);
  });
});

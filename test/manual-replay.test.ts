import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { inboundWorkflowId } from '../lib/hashing';
import { type InboundMessageResult, type MessageRef, replyKey } from '../contract';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
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

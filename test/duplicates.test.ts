import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../contract';
import { messageReceivedBody } from '../sandbox/control-client';
import { Harness, waitForStart } from './support/harness';
import { signedHeaders } from './support/signing';
import { eventually, workflowExists } from './support/temporal';
import { inboundWorkflow, within } from './support/workflow-watch';

// Duplicates and races, counted where the effects land: emails in the sandbox's outbox,
// tickets in Postgres, drafter (model) calls, workflow runs in Temporal, event rows.
let h: Harness;
before(async () => {
  h = await Harness.start();
});
after(() => h.close());

const HOUR_MS = 60 * 60 * 1000;

// A sender per message: the per-sender reply budget is shared by every test on this database.
const customerMail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Grace Hopper <grace-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'My invoice is wrong',
  text: 'Invoice 7 charges me twice.',
});

/** The provider-side proof: emails sent, tickets opened, model calls made for one message. */
async function effectCounts(ref: MessageRef) {
  return {
    emails: (await h.sandbox.outbox({ inbox_id: ref.inboxId, in_reply_to: ref.messageId })).length,
    tickets: (await h.ticketsFor(ref)).length,
    drafterCalls: h.drafter.callsFor(ref),
  };
}
const ONCE = { emails: 1, tickets: 1, drafterCalls: 1 };

/**
 * The runs of a workflow id. Exact, not "the first run visibility shows": the latest run, as Temporal
 * describes it, must be the first one (`firstRunId`), and visibility is read only once it lists that
 * run in its final state (it is written asynchronously), so a second run cannot hide behind its lag.
 */
async function runsOf(workflowId: string): Promise<string[]> {
  const latest = await h.client.workflow.getHandle(workflowId).describe();
  assert.equal(latest.raw.workflowExecutionInfo?.firstRunId, latest.runId, 'the latest run is the first');
  return eventually(async () => {
    const runs: Array<{ runId: string; status: string }> = [];
    for await (const run of h.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
      runs.push({ runId: run.runId, status: run.status.name });
    const caughtUp = runs.some((r) => r.runId === latest.runId && r.status === latest.status.name);
    return caughtUp ? runs.map((r) => r.runId) : undefined;
  }, `visibility to list the run of ${workflowId} as ${latest.status.name}`);
}

async function eventOutcomes(ref: MessageRef): Promise<Map<string, string>> {
  const rows = await h.db.query<{ event_id: string; outcome: string }>(
    'SELECT event_id, outcome FROM inbound_events WHERE inbox_id = $1 AND message_id = $2',
    [ref.inboxId, ref.messageId],
  );
  return new Map(rows.rows.map((r) => [r.event_id, r.outcome]));
}

const post = (body: string) =>
  fetch(`${h.apiUrl}/webhooks/agentmail`, { method: 'POST', body, headers: signedHeaders(h.webhookSecret, body) }).then(
    (r) => r.status,
  );

describe('duplicates and races at the ingress', () => {
  test(
    'one event delivered 50 times at once, raced by 50 re-sends under new event ids → all 2xx, one run, one email, one ticket, one model call',
    { timeout: 90_000 },
    async () => {
      // Prepare
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound({ ...customerMail(inboxId), deliver: false });
      const ref = { inboxId, messageId: inbound.message.message_id };
      const sameEvent = messageReceivedBody(inbound, inbound.event_id);
      const resentEventIds = Array.from({ length: 50 }, () => `evt_${randomUUID().replaceAll('-', '')}`);

      // Act: all 100 deliveries in flight together
      const statuses = await Promise.all([
        ...Array.from({ length: 50 }, () => post(sameEvent)),
        ...resentEventIds.map((eventId) => post(messageReceivedBody(inbound, eventId))),
      ]);

      // Assess
      assert.deepEqual(
        statuses.filter((s) => s < 200 || s > 299),
        [],
        'every delivery gets a 2xx',
      );
      const result = await h.workflowResult(ref);
      assert.equal(result.status, 'sent');
      assert.equal((await runsOf(inboundWorkflowId(ref))).length, 1, 'one workflow run for the message');
      assert.deepEqual(await effectCounts(ref), ONCE);

      const outcomes = await eventOutcomes(ref);
      assert.equal(outcomes.size, 51, '1 + 50 distinct event ids recorded');
      assert.deepEqual(
        [...outcomes.values()].filter((o) => o === 'queued'),
        ['queued'],
        'exactly one event started the workflow',
      );
      assert.ok([...outcomes.values()].every((o) => o === 'queued' || o === 'duplicate'));
      const rows = await h.db.query<{ first_event_id: string; attempts: number }>(
        'SELECT first_event_id, attempts FROM intake WHERE workflow_id = $1',
        [inboundWorkflowId(ref)],
      );
      assert.equal(rows.rowCount, 1, 'one intake row: Postgres decided which delivery was first');
      assert.equal(
        outcomes.get(rows.rows[0]!.first_event_id),
        'queued',
        'the queued event is the one that made the row',
      );
      assert.equal(rows.rows[0]!.attempts, 1, 'its workflow was started once');
    },
  );

  test(
    'a webhook redriven hours after it was answered (same event, and as a new event) → 2xx, recorded duplicate, no second business action',
    { timeout: 90_000 },
    async () => {
      // Prepare: answered once
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound(customerMail(inboxId));
      const ref = { inboxId, messageId: inbound.message.message_id };
      const first = await (await inboundWorkflow(h, ref)).result();
      assert.equal(first.status, 'sent');
      assert.deepEqual(await effectCounts(ref), ONCE);

      // Act: hours pass on the sandbox's clock; the same event is redriven, then re-sent as new
      await h.sandbox.advanceClock(6 * HOUR_MS);
      const redriven = await h.sandbox.redeliver(inbound.event_id);
      const resent = await h.sandbox.resendAsNew(inbound.event_id);
      const resentAttempts = await h.sandbox.waitForDeliveries(
        (attempts) => attempts.some((a) => a.ok) || attempts.length >= 2,
        { eventId: resent.event_id },
      );

      // Assess: Svix signs with the real time, so our 5-minute timestamp check still accepts both
      assert.equal(redriven.status, 204, `redelivery answered ${redriven.status} (${redriven.error ?? ''})`);
      assert.equal(
        resentAttempts[0]?.status,
        204,
        `the re-sent event answered ${resentAttempts[0]?.status} (${resentAttempts[0]?.error ?? ''})`,
      );
      const outcomes = await eventOutcomes(ref);
      assert.equal(outcomes.get(inbound.event_id), 'queued');
      assert.equal(outcomes.get(resent.event_id), 'duplicate');
      assert.equal(outcomes.size, 2);
      assert.equal((await runsOf(inboundWorkflowId(ref))).length, 1);
      assert.deepEqual(await effectCounts(ref), ONCE);
    },
  );

  test(
    "a message replayed after its workflow and its intake row are gone (past Temporal's and the intake's retention) → a new run replays draft, ticket and reply from the store: still one of each",
    { timeout: 90_000 },
    async () => {
      // Prepare: answered once, then the execution is gone, as past the namespace's retention, and
      // so is the intake row, as retention deletes it 7 days after the start
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound(customerMail(inboxId));
      const ref = { inboxId, messageId: inbound.message.message_id };
      const handle = await inboundWorkflow(h, ref);
      const first = await handle.result();
      assert.equal(first.status, 'sent');
      const { runId: firstRunId } = await handle.describe();
      await h.client.workflowService.deleteWorkflowExecution({
        namespace: h.client.options.namespace,
        workflowExecution: { workflowId: handle.workflowId },
      });
      // Temporal deletes a just-closed execution only after its queues' ack levels move past the
      // close (history.transferProcessorUpdateAckInterval, 30 s by default): allow for that.
      await eventually(
        async () => ((await workflowExists(h.client, handle.workflowId)) ? undefined : true),
        'the deleted execution to disappear',
        60_000,
      );
      await h.db.query('DELETE FROM intake WHERE workflow_id = $1', [handle.workflowId]);

      // Act: the same message arrives again under a new event id
      const resent = await h.sandbox.resendAsNew(inbound.event_id);
      await eventually(async () => (await eventOutcomes(ref)).get(resent.event_id), 'the re-sent event to be recorded');

      // Assess: a new run with the same workflow id, whose effects were all replays
      await waitForStart(h, ref);
      const replay = await within(20_000, h.client.workflow.getHandle(handle.workflowId).result(), 'the replayed run');
      const { runId: replayRunId } = await h.client.workflow.getHandle(handle.workflowId).describe();
      assert.notEqual(replayRunId, firstRunId, 'a new run');
      assert.equal((await eventOutcomes(ref)).get(resent.event_id), 'queued', 'the intake took it as a new job');
      assert.equal(replay.status, 'sent');
      assert.equal(replay.status === 'sent' && replay.replayed, true);
      assert.equal(replay.status === 'sent' && first.status === 'sent' && replay.replyMessageId, first.replyMessageId);
      assert.equal(replay.status === 'sent' && first.status === 'sent' && replay.ticketId, first.ticketId);
      assert.deepEqual(await effectCounts(ref), ONCE);
    },
  );
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { checkWebhooks, type InboxCatchUp, type WebhookCheck } from '../activities/upkeep/webhook-watchdog';
import { webhookEndpointDisabled, webhookEndpointDisabledNotOurs } from '../lib/metrics';
import { SANDBOX_WEBHOOK_ID } from '../sandbox/webhooks';
import { ensureSchedules, scheduleIds } from '../worker/schedules';
import type { WebhookWatchdogResult } from '../workflows/webhook-watchdog';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { activityConfig } from '../lib/config';

// The watchdog on real parts: the sandbox switches its webhook off as AgentMail does after 5
// days of failures (silently, never redelivering), and the watchdog workflow — started by hand
// or by its Temporal Schedule — notices, alerts, and (when configured) turns it back on and
// hands the mail that arrived meanwhile over to the intake (the harness API's relay starts it),
// so it is answered exactly once.
let h: Harness;
before(async () => {
  h = await Harness.start({ webhookReenable: true });
});
after(() => h.close());

const mail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Alan <alan-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'Refund',
  text: 'May I have a refund?',
});

const runWatchdog = (harness: Harness): Promise<WebhookWatchdogResult> =>
  harness.client.workflow.execute('webhookWatchdogWorkflow', {
    taskQueue: harness.taskQueue,
    workflowId: `watchdog-${randomUUID()}`,
    args: [],
  });

async function disabledGauge(): Promise<number> {
  return (await webhookEndpointDisabled.get()).values[0]?.value ?? 0;
}

/** Mail that arrives while the webhook is off: stored at the sandbox, every delivery skipped. */
async function arriveWhileOff(harness: Harness, inboxId: string, count: number) {
  const arrived = [];
  for (let i = 0; i < count; i += 1) arrived.push(await harness.sandbox.inbound(mail(inboxId)));
  const ids = new Set(arrived.map((a) => a.event_id));
  await eventually(
    async () =>
      (await harness.sandbox.events()).filter((e) => ids.has(e.event_id)).every((e) => e.status === 'skipped')
        ? true
        : undefined,
    'the deliveries to be skipped',
  );
  return arrived.map((a) => a.message);
}

/** The sandbox's webhook covers the inboxes named so far: the watchdog catches up just those. */
async function watchInbox(inboxId: string): Promise<void> {
  await h.agentmail.webhooks.update(SANDBOX_WEBHOOK_ID, { addInboxIds: [inboxId] });
}

const isSummary = (c: InboxCatchUp | undefined): c is Extract<InboxCatchUp, { handedOver: number }> =>
  c !== undefined && 'handedOver' in c;

describe('webhook watchdog', () => {
  test('WATCHDOG_REENABLE: a disabled webhook → alert and metric, re-enabled, the missed mail answered once, deliveries flow again', async () => {
    // Prepare: one message answered normally (the inbox gets a cursor), then the endpoint goes off.
    const inboxId = h.newInbox();
    await watchInbox(inboxId);
    const first = await h.sandbox.inbound(mail(inboxId));
    assert.equal((await h.resultOf({ inboxId, messageId: first.message.message_id })).status, 'sent');
    await h.sandbox.setWebhook({ enabled: false });
    const missed = await arriveWhileOff(h, inboxId, 2);

    // Act
    const result = await runWatchdog(h);

    // Assess
    assert.deepEqual(
      [result.watched, result.disabled, result.reenabled],
      [[SANDBOX_WEBHOOK_ID], [SANDBOX_WEBHOOK_ID], [SANDBOX_WEBHOOK_ID]],
    );
    assert.equal(await disabledGauge(), 1, 'the metric says what the run found');
    assert.deepEqual(result.catchUpInboxes, [inboxId], 'the inboxes the webhook covers');
    const ours = result.catchUps.find((c) => c.inboxId === inboxId);
    assert.ok(isSummary(ours), JSON.stringify(result.catchUps));
    assert.deepEqual(
      { handedOver: ours.handedOver, alreadyHandedOver: ours.alreadyHandedOver, resumed: ours.resumed },
      { handedOver: 2, alreadyHandedOver: 1, resumed: true },
      'the message the webhook delivered has its row: already handed over',
    );
    assert.equal((await h.agentmail.webhooks.list()).webhooks[0]?.enabled, true, 'the webhook is on again');
    for (const message of missed) {
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
      assert.equal((await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: message.message_id })).length, 1);
    }
    assert.equal(
      (await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: first.message.message_id })).length,
      1,
      'the earlier message is not answered again',
    );

    const later = await h.sandbox.inbound(mail(inboxId));
    assert.equal(
      (await h.resultOf({ inboxId, messageId: later.message.message_id })).status,
      'sent',
      'webhooks are delivered again',
    );

    const calm = await runWatchdog(h);
    assert.deepEqual([calm.disabled, calm.catchUps], [[], []]);
    assert.equal(await disabledGauge(), 0);
  });

  test('without WATCHDOG_REENABLE: alert and metric only; the webhook stays off and nothing is replayed', async () => {
    const quiet = await Harness.start({ webhookReenable: false });
    try {
      const inboxId = quiet.newInbox();
      const first = await quiet.sandbox.inbound(mail(inboxId));
      await quiet.resultOf({ inboxId, messageId: first.message.message_id });
      await quiet.sandbox.setWebhook({ enabled: false });
      const [missed] = await arriveWhileOff(quiet, inboxId, 1);

      const result = await runWatchdog(quiet);

      assert.deepEqual(
        [result.disabled, result.reenabled, result.catchUpInboxes, result.catchUps],
        [[SANDBOX_WEBHOOK_ID], [], [], []],
      );
      assert.equal(await disabledGauge(), 1);
      assert.equal((await quiet.agentmail.webhooks.list()).webhooks[0]?.enabled, false);
      assert.equal((await quiet.sandbox.outbox({ inbox_id: inboxId, in_reply_to: missed!.message_id })).length, 0);

      // This webhook covers every inbox: a catch-up would replay every inbox with a cursor.
      const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
      const deps = {
        db: quiet.db,
        agentmail: quiet.agentmail,
        config: activityConfig({
          WATCHDOG_REENABLE: true,
          WATCHDOG_WEBHOOK_IDS: [],
          PUBLIC_WEBHOOK_URL: `${quiet.apiUrl}/webhooks/agentmail`,
          OPERATION_RETENTION_DAYS: 90,
        }),
      };
      const check: WebhookCheck = await env.run(checkWebhooks, deps);
      assert.ok(check.disabled[0]?.inboxes.includes(inboxId));
      // WATCHDOG_WEBHOOK_IDS: only the named webhooks are watched.
      const named: WebhookCheck = await env.run(checkWebhooks, {
        ...deps,
        config: { ...deps.config, WATCHDOG_WEBHOOK_IDS: ['ep_someone_else'] },
      });
      assert.deepEqual(named.watched, []);
    } finally {
      await quiet.close();
    }
  });

  test("only this deployment's webhook is watched and re-enabled: a colleague's disabled webhook is reported, never changed", async () => {
    // Prepare: the organisation has two more message.received webhooks, both disabled — another
    // team's, and one on a different URL with our path; ours goes off too.
    const colleague = `ep_colleague_${randomUUID().slice(0, 6)}`;
    const lookalike = `ep_lookalike_${randomUUID().slice(0, 6)}`;
    await h.sandbox.addOtherWebhook({
      webhook_id: colleague,
      url: 'https://crm.example.com/hooks/mail',
      enabled: false,
    });
    await h.sandbox.addOtherWebhook({
      webhook_id: lookalike,
      url: 'https://staging.example.com/webhooks/agentmail',
      enabled: false,
      event_types: ['message.received'],
    });
    await h.sandbox.setWebhook({ enabled: false });
    const webhook = async (id: string) => (await h.agentmail.webhooks.list()).webhooks.find((w) => w.webhookId === id);
    try {
      // Act
      const result = await runWatchdog(h);

      // Assess: ours found and re-enabled; the others read, reported, left off
      assert.deepEqual(
        [result.watched, result.disabled, result.reenabled],
        [[SANDBOX_WEBHOOK_ID], [SANDBOX_WEBHOOK_ID], [SANDBOX_WEBHOOK_ID]],
      );
      assert.equal((await webhook(SANDBOX_WEBHOOK_ID))?.enabled, true);
      assert.equal((await webhook(colleague))?.enabled, false, "the colleague's webhook stays off");
      assert.equal((await webhook(lookalike))?.enabled, false, 'a webhook on another host stays off');
      assert.equal(await disabledGauge(), 1, 'the disabled gauge counts ours only');
      assert.equal((await webhookEndpointDisabledNotOurs.get()).values[0]?.value, 2, 'the others have their own gauge');

      // WATCHDOG_WEBHOOK_IDS names what is ours instead: the colleague's, if an operator says so.
      const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
      const config = activityConfig({ WATCHDOG_REENABLE: true, PUBLIC_WEBHOOK_URL: `${h.apiUrl}/webhooks/agentmail` });
      const byId: WebhookCheck = await env.run(checkWebhooks, {
        db: h.db,
        agentmail: h.agentmail,
        config: { ...config, WATCHDOG_WEBHOOK_IDS: [colleague] },
      });
      assert.deepEqual([byId.watched, byId.notOurs], [[colleague], [lookalike]]);
      // With neither set, nothing is ours: every disabled webhook is reported, none watched.
      const unset: WebhookCheck = await env.run(checkWebhooks, {
        db: h.db,
        agentmail: h.agentmail,
        config: { ...config, PUBLIC_WEBHOOK_URL: undefined },
      });
      assert.deepEqual(unset.watched, []);
      assert.deepEqual(unset.notOurs.sort(), [colleague, lookalike].sort());
      // A trailing slash or a capitalised host is still our URL.
      const spelled: WebhookCheck = await env.run(checkWebhooks, {
        db: h.db,
        agentmail: h.agentmail,
        config: { ...config, PUBLIC_WEBHOOK_URL: `${h.apiUrl.replace('http://', 'HTTP://')}/webhooks/agentmail/` },
      });
      assert.deepEqual(spelled.watched, [SANDBOX_WEBHOOK_ID]);
    } finally {
      await h.sandbox.setWebhook({ enabled: true });
    }
  });

  test("the re-enable's answer is lost after AgentMail applied it → the retry finds it on, and the catch-up still runs", async () => {
    const inboxId = h.newInbox();
    await watchInbox(inboxId);
    const first = await h.sandbox.inbound(mail(inboxId));
    await h.resultOf({ inboxId, messageId: first.message.message_id });
    await h.sandbox.setWebhook({ enabled: false });
    const [missed] = await arriveWhileOff(h, inboxId, 1);
    await h.sandbox.setFaults({
      match: { method: 'PATCH', path: `/v0/webhooks/${SANDBOX_WEBHOOK_ID}`, count: 1 },
      action: 'drop-after-commit',
    });
    try {
      const result = await runWatchdog(h);
      assert.deepEqual(result.reenabled, [SANDBOX_WEBHOOK_ID]);
      const ours = result.catchUps.find((c) => c.inboxId === inboxId);
      assert.ok(isSummary(ours) && ours.handedOver === 1, JSON.stringify(ours));
      assert.equal((await h.workflowResult({ inboxId, messageId: missed!.message_id })).status, 'sent');
    } finally {
      await h.sandbox.clearFaults();
    }
  });

  test('AgentMail refuses the re-enable (403) → reported, nothing replayed, the webhook stays off', async () => {
    await h.sandbox.setWebhook({ enabled: false });
    await h.sandbox.setFaults({
      match: { method: 'PATCH', path: `/v0/webhooks/${SANDBOX_WEBHOOK_ID}` },
      action: 'status',
      status: 403,
    });
    try {
      const result = await runWatchdog(h);
      assert.deepEqual([result.disabled, result.reenabled, result.catchUps], [[SANDBOX_WEBHOOK_ID], [], []]);
      assert.equal((await h.agentmail.webhooks.list()).webhooks[0]?.enabled, false);
    } finally {
      await h.sandbox.clearFaults();
      await h.sandbox.setWebhook({ enabled: true });
    }
  });

  test('an inbox with a cursor that AgentMail no longer has is reported, not retried forever', async () => {
    const gone = `gone-${randomUUID().slice(0, 8)}@${h.inboxDomain}`;
    await h.db.query('INSERT INTO inbox_cursors (inbox_id, newest_message_at) VALUES ($1, now())', [gone]);
    await watchInbox(gone);
    await h.sandbox.setWebhook({ enabled: false });
    const result = await runWatchdog(h);
    assert.deepEqual(
      result.catchUps.find((c) => c.inboxId === gone),
      { inboxId: gone, notRun: 'AgentMail has no such inbox (deleted?)' },
    );
  });
});

describe('schedules', () => {
  test('created idempotently (as at every worker start); triggering the watchdog schedule runs the check', async () => {
    const ids = scheduleIds(h.taskQueue);
    try {
      assert.deepEqual(await ensureSchedules(h.client, h.taskQueue), {
        created: [ids.watchdog, ids.retention],
        updated: [],
      });
      assert.deepEqual(await ensureSchedules(h.client, h.taskQueue), {
        created: [],
        updated: [ids.watchdog, ids.retention],
      });

      const handle = h.client.schedule.getHandle(ids.watchdog);
      const described = await handle.describe();
      assert.equal(
        described.action.type === 'startWorkflow' && described.action.workflowType,
        'webhookWatchdogWorkflow',
      );
      assert.equal(described.policies.overlap, ScheduleOverlapPolicy.SKIP);
      assert.deepEqual(
        (described.spec.intervals ?? []).map((i) => i.every),
        [5 * 60 * 1000],
      );

      await h.sandbox.setWebhook({ enabled: false });
      await handle.trigger();
      const workflowId = await eventually(
        async () => (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId,
        'the schedule to start the watchdog',
      );
      const result: WebhookWatchdogResult = await h.client.workflow.getHandle(workflowId).result();
      assert.deepEqual([result.disabled, result.reenabled], [[SANDBOX_WEBHOOK_ID], [SANDBOX_WEBHOOK_ID]]);
    } finally {
      for (const id of Object.values(ids))
        await h.client.schedule
          .getHandle(id)
          .delete()
          .catch(() => undefined);
    }
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { INBOUND_MESSAGE_WORKFLOW, type MessageRef, notifyKey } from '../contract';
import { inboundWorkflowId, providerIdempotencyKey } from '../lib/hashing';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { WebhookCounter } from './support/webhook-counter';

// People hear when a reply waits: one webhook notification when it starts waiting, one when it
// is escalated, each under its own operation key — across a worker killed right after storing a
// notification, and across a replay of the whole message. A webhook stand-in on loopback counts them.
const DESK = 'http://desk.test:3300';
let h: Harness;
let hook: WebhookCounter;
const workers: AppProcess[] = [];

before(async () => {
  h = await Harness.start({ worker: false });
  hook = await WebhookCounter.start();
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await hook?.close();
  await h?.close();
});

const APPROVAL_TIMEOUT_MS = 6_000;
async function startWorker(options: { failpoints?: ['notify.after-store']; env?: Record<string, string> } = {}) {
  const worker = await AppProcess.startWorker(h, {
    failpoints: options.failpoints ?? [],
    env: {
      APPROVAL_REQUIRED_INBOXES: '*',
      APPROVAL_TIMEOUT_MS: String(APPROVAL_TIMEOUT_MS),
      REVIEW_NOTIFY_WEBHOOK_URL: hook.url,
      DESK_PUBLIC_URL: DESK,
      ...options.env,
    },
  });
  workers.push(worker);
  return worker;
}

async function newMessage(text: string): Promise<MessageRef> {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    // Not `notify-…@`: that reads as a robot sender (notifications-style, activities/decide/reply-policy.ts).
    from: `ada-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Private subject line',
    text,
  });
  return { inboxId, messageId: inbound.message.message_id };
}

const link = (workflowId: string) => `${DESK}/messages/${workflowId}`;
const waitingFor = (ref: MessageRef) => hook.about(link(inboundWorkflowId(ref)));

async function operationRow(key: string) {
  return (
    await h.db.query<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM operations WHERE operation_key = $1',
      [key],
    )
  ).rows[0];
}

describe('review notifications', () => {
  test('a worker killed right after storing the "waiting" notification: one waiting, one escalated, never a second', async () => {
    const crashing = await startWorker({ failpoints: ['notify.after-store'] });
    const ref = await newMessage('My secret words: blue heron.');
    const died = await crashing.exited;
    assert.equal(died.signal, 'SIGKILL', 'the worker died after storing the notification');
    assert.equal(waitingFor(ref).length, 1, 'the notification went out before the crash');
    assert.equal((await operationRow(notifyKey(ref, 'waiting')))?.status, 'complete');

    await startWorker();
    // The retry of the crashed attempt finds the stored notification; the escalation is a notification of its own.
    await eventually(
      async () => (waitingFor(ref).length >= 2 ? true : undefined),
      'the escalation notification',
      40_000,
    );
    await eventually(
      async () => ((await operationRow(notifyKey(ref, 'waiting')))?.attempts === 1 ? true : undefined),
      'the waiting notification to stay one attempt',
    );
    await new Promise((resolve) => setTimeout(resolve, 12_000)); // past the crashed attempt's heartbeat timeout and its retry
    const texts = waitingFor(ref).map((b) => b.text);
    assert.equal(texts.length, 2, texts.join('\n---\n'));
    assert.equal(texts.filter((t) => /waits for a reviewer/.test(t)).length, 1);
    assert.equal(texts.filter((t) => /escalated/.test(t)).length, 1);
    assert.equal((await operationRow(notifyKey(ref, 'escalated')))?.status, 'complete');
    // Ids and a link only: no customer text unless REVIEW_NOTIFY_INCLUDE_TEXT=true.
    for (const text of texts) {
      assert.ok(!text.includes('blue heron'), 'no customer words');
      assert.ok(!text.includes('Private subject line'), 'no subject');
      assert.ok(!text.includes('customer.example'), 'no sender address');
    }

    // A replay of the message (an operator's rerun: the run is stopped, then started again under its
    // workflow id, as `npm run replay -- --rerun` does) waits again, reaches both notifications'
    // keys, and tells no one again. Its thread gives the new run the stopped run's turn.
    const first = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await first.terminate('operator: rerun it');
    const replay = await h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
      workflowId: inboundWorkflowId(ref),
      taskQueue: h.taskQueue,
      args: [ref],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    await eventually(
      async () => {
        const description = await replay.describe();
        return description.searchAttributes.ReplyStatus?.[0] === 'escalated' ? true : undefined;
      },
      'the replay to wait and be escalated',
      40_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.equal(waitingFor(ref).length, 2, 'the replay notified no one');
    await replay.terminate('test over');
  });

  test('with REVIEW_NOTIFY_INCLUDE_TEXT=true the notification carries the customer words and the draft; REVIEW_NOTIFY_ADDRESS gets it by email once', async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await startWorker({
      env: {
        REVIEW_NOTIFY_INCLUDE_TEXT: 'true',
        REVIEW_NOTIFY_ADDRESS: 'reviewers@team.example',
        APPROVAL_TIMEOUT_MS: '600000',
      },
    });
    // Slack markup in the customer's words (issue 39, point 10): an @channel ping and a link dressed as ours.
    const ref = await newMessage('Words to show: red kite. <!channel> <https://evil.example/x|Open desk> & <@U123>');
    await eventually(async () => (waitingFor(ref).length >= 1 ? true : undefined), 'the waiting notification');
    const [body] = waitingFor(ref);
    assert.match(body!.text, /red kite/);
    assert.match(body!.text, /Private subject line/);
    assert.match(body!.text, /Draft:/);
    // Escaped as Slack asks (&, <, >): shown as typed, never a ping or a link.
    assert.ok(
      body!.text.includes('&lt;!channel&gt; &lt;https://evil.example/x|Open desk&gt; &amp; &lt;@U123&gt;'),
      body!.text,
    );
    assert.ok(!/<[!@#]|<https?:/.test(body!.text), body!.text);
    // The same notification by email through AgentMail, once, under the notification's Idempotency-Key.
    const emails = (await h.sandbox.outbox({ inbox_id: ref.inboxId })).filter((e) =>
      e.message.to.includes('reviewers@team.example'),
    );
    assert.equal(emails.length, 1);
    assert.match(emails[0]!.message.text ?? '', /red kite/);
    assert.equal(emails[0]!.idempotency_key, providerIdempotencyKey(notifyKey(ref, 'waiting')));
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
  });
});

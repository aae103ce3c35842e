import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { INBOUND_MESSAGE_WORKFLOW, type MessageRef } from '../contract';
import { inboundWorkflowId, threadKeyOf } from '../lib/hashing';
import { ask, due, idle, release, type TurnAsk } from '../activities/turns/rule';
import { changeTurns, readTurns } from '../activities/turns/turn-table';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { replyStatus, within } from './support/workflow-watch';

// Threads' turns in Postgres (activities/turns/) against a real Temporal and a real Postgres: an ask
// answered in its own result when the turn is free, a holder looked at only while someone waits, and
// nothing lost when a signal is (a waiting run asks again).

const COALESCE_MS = 2_000;
/** Waiting runs ask again this often at most: what recovers a lost signal. */
const REASK_MS = 2_000;

let h: Harness;
before(async () => {
  h = await Harness.start({ coalesceMs: COALESCE_MS, activityConfig: { TURN_REASK_MS: REASK_MS } });
});
after(() => h.close());

function conversation() {
  const inboxId = h.newInbox();
  const threadId = randomUUID();
  const from = `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
  const threadKey = threadKeyOf(inboxId, threadId);
  return {
    inboxId,
    threadId,
    threadKey,
    async write(text: string): Promise<MessageRef> {
      const inbound = await h.sandbox.inbound({ inbox_id: inboxId, thread_id: threadId, from, subject: 'Order', text });
      return { inboxId, messageId: inbound.message.message_id };
    },
    /** The thread as its row has it (null: nobody holds or waits). */
    kept: async () => {
      const turns = await readTurns(h.db, threadKey);
      return turns === null || idle(turns) ? null : turns;
    },
    /** An ask of a run that is not a message run of this harness (a stand-in), applied to the row as the ask activity does. */
    askFor: (run: { workflowId: string; firstExecutionRunId: string }, messageId: string): TurnAsk => ({
      inboxId,
      threadId,
      workflowId: run.workflowId,
      runId: run.firstExecutionRunId,
      messageId,
      timestampMs: Date.now() - 60_000,
      sender: 'someone',
      coalesceMs: 0,
    }),
  };
}

const handleOf = (ref: MessageRef) => h.client.workflow.getHandle(inboundWorkflowId(ref));
const signalsOf = async (handle: WorkflowHandle) =>
  ((await handle.fetchHistory()).events ?? []).flatMap(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? [],
  );

/** A run that stays open until the test ends it (its task queue has no worker): it stands in for a message run. */
async function standInRun() {
  return h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
    workflowId: `stand-in-${randomUUID()}`,
    taskQueue: `nobody-polls-${randomUUID()}`,
    args: [{ inboxId: 'stand-in', messageId: randomUUID() }],
  });
}

/** Makes a stand-in the thread's holder, as its ask would have. */
async function holdTurn(c: ReturnType<typeof conversation>, run: { workflowId: string; firstExecutionRunId: string }) {
  const { tells } = await changeTurns(h.db, c.threadKey, (state, now) => [
    ...ask(state, c.askFor(run, 'stand-in-message'), now),
    ...due(state, now),
  ]);
  assert.deepEqual(
    tells.map((t) => t.grant.kind),
    ['go'],
    'the stand-in holds the turn',
  );
}

describe('a thread of one message', () => {
  test('its ask answers it (no `turn` signal), its history stays within 36 events, and nobody holds or waits in its row after', async () => {
    const c = conversation();
    const ref = await c.write('Where is my order?');
    const result = await h.workflowResult(ref, 60_000);
    assert.equal(result.status, 'sent');
    assert.deepEqual(await signalsOf(handleOf(ref)), [], 'no signal: the turn came back in the ask');
    const events = (await handleOf(ref).describe()).historyLength;
    // 28 before conversations, the window's timer (5) and the two asks' markers; a keeper cost 14 more.
    assert.ok(events <= 36, `${events} history events`);
    assert.equal(await c.kept(), null);
  });
});

describe('one holder per thread, under the row lock', () => {
  test("twenty asks of one thread's free turn at once, from different runs: exactly one is told go", async () => {
    const c = conversation();
    const runs = Array.from({ length: 20 }, () => ({
      workflowId: `run-${randomUUID()}`,
      firstExecutionRunId: randomUUID(),
    }));
    const answers = await Promise.all(
      runs.map((run, i) =>
        changeTurns(h.db, c.threadKey, (state, now) => [
          ...ask(state, c.askFor(run, `m${i}`), now),
          ...due(state, now),
        ]),
      ),
    );
    const gos = answers.flatMap(({ tells }) => tells).filter((t) => t.grant.kind === 'go');
    assert.equal(gos.length, 1, `go told ${gos.length} times`);
    const kept = await c.kept();
    assert.equal(kept?.holder?.runId, gos[0]!.runId);
    assert.equal(kept?.waiting.length, 19);
  });
});

describe('nothing lost', () => {
  test('a holder that closes without giving the turn back (terminated) is found closed by the ask of the message behind it, which gets its turn', async () => {
    const c = conversation();
    const holder = await standInRun();
    await holdTurn(c, holder);
    const ref = await c.write('Anyone there?');
    await eventually(async () => ((await c.kept())?.waiting.length === 1 ? true : undefined), 'the message to wait');
    await holder.terminate('an operator stops it');
    const result = await h.workflowResult(ref, 60_000);
    assert.equal(result.status, 'sent');
  });

  test('a turn whose signal is lost (the releasing worker died between the commit and the signal): the waiting message asks again and gets it', async () => {
    const c = conversation();
    const holder = await standInRun();
    try {
      await holdTurn(c, holder);
      const ref = await c.write('Anyone there?');
      await eventually(async () => ((await c.kept())?.waiting.length === 1 ? true : undefined), 'the message to wait');
      // Act: the turn given back and passed on in the row, and no signal sent: what a crash leaves
      const { tells } = await changeTurns(h.db, c.threadKey, (state, now) => [
        ...release(state, holder.firstExecutionRunId, {
          messageId: 'stand-in-message',
          sender: 'someone',
          timestampMs: Date.now() - 60_000,
          sent: false,
        }),
        ...due(state, now),
      ]);
      assert.deepEqual(
        tells.map((t) => `${t.grant.kind}:${t.workflowId}`),
        [`go:${inboundWorkflowId(ref)}`],
      );
      // Assess: answered all the same, without ever hearing a `go` signal
      const result = await within(60_000, h.workflowResult(ref, 60_000), 'the waiting message');
      assert.equal(result.status, 'sent');
      assert.deepEqual(await signalsOf(handleOf(ref)), [], 'it heard its turn in an ask, never by signal');
      assert.equal(await c.kept(), null);
    } finally {
      await holder.terminate('stand-in').catch(() => undefined);
    }
  });
});

describe('a burst is read when it has ended', () => {
  test("a message written inside the window whose webhook comes after the window ended: one reply for both (issue #34's 100 replies for 100 bursts)", async () => {
    // Prepare: a window long enough that the second message is written inside it on a busy machine
    const own = await Harness.start({ coalesceMs: 6_000, activityConfig: { TURN_REASK_MS: REASK_MS } });
    try {
      const inboxId = own.newInbox();
      const threadId = randomUUID();
      const from = `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
      const write = (text: string, deliver: boolean) =>
        own.sandbox.inbound({ inbox_id: inboxId, thread_id: threadId, from, subject: 'Order', text, deliver });
      const first = await write('Where is my order?', true);
      const firstRef = { inboxId, messageId: first.message.message_id };
      const firstRun = own.client.workflow.getHandle(inboundWorkflowId(firstRef));
      // The first message's run is under way (it decided and waits) before the second is written
      await eventually(
        async () =>
          ((await replyStatus(firstRun).catch(() => [])) as string[])[0] === 'waiting_turn' ? true : undefined,
        'the first message to wait',
      );
      const second = await write('It was order 42.', false);
      const secondRef = { inboxId, messageId: second.message.message_id };
      // Act: the second webhook comes two seconds after the first message's window has ended
      const windowEndsMs = first.message.timestamp ? Date.parse(first.message.timestamp) + 6_000 : Date.now() + 6_000;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, windowEndsMs + 2_000 - Date.now())));
      await own.sandbox.redeliver(second.event_id);
      // Assess: one email, in reply to the newest message, answering both (before: the first message
      // had asked at its webhook, named nothing newer, and was answered alone; the second got a reply of its own)
      assert.equal((await within(60_000, own.workflowResult(secondRef, 60_000), 'the second')).status, 'sent');
      assert.equal(
        (await within(60_000, own.workflowResult(firstRef, 60_000), 'the first')).status,
        'answered-together',
      );
      const sent = await own.sandbox.outbox({ inbox_id: inboxId });
      assert.equal(sent.length, 1, 'one email for the burst');
      assert.equal(sent[0]?.message.in_reply_to, secondRef.messageId);
    } finally {
      await own.close();
    }
  });
});

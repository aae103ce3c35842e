import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import {
  askTurnSignal,
  INBOUND_MESSAGE_WORKFLOW,
  type MessageRef,
  threadTurnsQuery,
  type TurnAsk,
  TURN_KEEPER_WORKFLOW,
  type TurnKeeperInput,
  turnKeeperTaskQueue,
} from '../contract';
import { inboundWorkflowId, threadTurnKeeper } from '../lib/hashing';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { replyStatus, within } from './support/workflow-watch';

// The turn keepers (workflows/turn-keeper.ts) against a real Temporal: asks and turns by signal, a
// holder looked at only while someone waits, nothing that lives only in a keeper.

const COALESCE_MS = 2_000;
/** Waiting runs ask again this often: what rebuilds a keeper's queue after an operator terminated it. */
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
  const keeper = threadTurnKeeper(inboxId, threadId, h.taskQueue);
  return {
    inboxId,
    threadId,
    keeper,
    async write(text: string): Promise<MessageRef> {
      const inbound = await h.sandbox.inbound({ inbox_id: inboxId, thread_id: threadId, from, subject: 'Order', text });
      return { inboxId, messageId: inbound.message.message_id };
    },
    kept: () =>
      h.client.workflow
        .getHandle(keeper.workflowId)
        .query(threadTurnsQuery, keeper.threadKey)
        .catch((error: unknown) => {
          if (error instanceof WorkflowNotFoundError) return null;
          throw error;
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

describe('asks and turns by signal', () => {
  test("a thread's one message: one ask, one `turn` signal, the turn given back, and the keeper keeps nothing of the thread", async () => {
    const c = conversation();
    const ref = await c.write('Where is my order?');
    const result = await h.workflowResult(ref, 60_000);
    assert.equal(result.status, 'sent');
    assert.deepEqual(await signalsOf(handleOf(ref)), ['turn']);
    await eventually(async () => ((await c.kept()) === null ? true : undefined), 'the keeper to forget the thread');
  });

  test('a holder that closes without giving the turn back (terminated) is found closed, and the message behind it gets its turn', async () => {
    const c = conversation();
    const holder = await standInRun();
    const keeperArgs: [TurnKeeperInput] = [{ index: c.keeper.index }];
    const ask: TurnAsk = {
      threadKey: c.keeper.threadKey,
      inboxId: c.inboxId,
      threadId: c.threadId,
      workflowId: holder.workflowId,
      runId: holder.firstExecutionRunId,
      messageId: 'stand-in-message',
      timestampMs: Date.now() - 60_000,
      sender: 'someone',
      coalesceMs: 0,
    };
    await h.client.workflow.signalWithStart(TURN_KEEPER_WORKFLOW, {
      workflowId: c.keeper.workflowId,
      taskQueue: turnKeeperTaskQueue(h.taskQueue),
      args: keeperArgs,
      signal: askTurnSignal,
      signalArgs: [ask],
    });
    await eventually(
      async () => ((await c.kept())?.holder?.runId === holder.firstExecutionRunId ? true : undefined),
      'the stand-in to hold the turn',
    );
    const ref = await c.write('Anyone there?');
    await eventually(async () => ((await c.kept())?.waiting.length === 1 ? true : undefined), 'the message to wait');
    await holder.terminate('an operator stops it');
    const result = await h.workflowResult(ref, 60_000);
    assert.equal(result.status, 'sent');
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

describe('nothing lives only in a keeper', () => {
  test('every keeper terminated while threads wait: every message is still answered (its run asks again, the new keeper rebuilds its queue)', async () => {
    // Prepare: eight threads, each a burst of two whose second webhook is held back: the first
    // message waits out its window in its own run, asks naming the second (AgentMail has it), and
    // then waits at its keeper for the second to ask — its place in the queue lives at the keeper.
    const threads = Array.from({ length: 8 }, () => conversation());
    const from = () => `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
    const bursts = await Promise.all(
      threads.map(async (c) => {
        const sender = from();
        const write = (text: string, deliver: boolean) =>
          h.sandbox.inbound({
            inbox_id: c.inboxId,
            thread_id: c.threadId,
            from: sender,
            subject: 'Order',
            text,
            deliver,
          });
        const first = await write('Where is my order?', true);
        const second = await write('It was order 42.', false);
        return {
          c,
          first: { inboxId: c.inboxId, messageId: first.message.message_id },
          second: { inboxId: c.inboxId, messageId: second.message.message_id },
          secondEvent: second.event_id,
        };
      }),
    );
    await eventually(async () => {
      const kept = await Promise.all(bursts.map(({ c }) => c.kept()));
      return kept.every((t) => t?.holder === null && t.waiting.length === 1) ? true : undefined;
    }, 'every first message to wait at its keeper for the second');
    // Act: an operator terminates every keeper; then the held-back webhooks come
    const keepers = [...new Set(bursts.map(({ c }) => c.keeper.workflowId))];
    await Promise.all(keepers.map((id) => h.client.workflow.getHandle(id).terminate('an operator resets the keepers')));
    await Promise.all(bursts.map(({ secondEvent }) => h.sandbox.redeliver(secondEvent)));
    // Assess: each burst answered once, by the second message's reply, to the customer
    for (const { c, first, second } of bursts) {
      const answered = await within(90_000, h.workflowResult(second, 90_000), second.messageId);
      assert.equal(answered.status, 'sent');
      const covered = await within(90_000, h.workflowResult(first, 90_000), first.messageId);
      assert.equal(covered.status, 'answered-together');
      assert.equal((await h.sandbox.outbox({ inbox_id: c.inboxId })).length, 1, 'one email a thread');
    }
  });
});

describe('a busy keeper stays cheap to replay', () => {
  test('it continues as new in short runs, and the next run keeps who holds and who waits', async () => {
    const c = conversation();
    const holder = await standInRun();
    const behind = await standInRun();
    const keeperArgs: [TurnKeeperInput] = [{ index: c.keeper.index }];
    const asks = (
      run: { workflowId: string; firstExecutionRunId: string },
      messageId: string,
      threadKey = c.keeper.threadKey,
    ): TurnAsk => ({
      threadKey,
      inboxId: c.inboxId,
      threadId: c.threadId,
      workflowId: run.workflowId,
      runId: run.firstExecutionRunId,
      messageId,
      timestampMs: Date.now() - 60_000,
      sender: 'someone',
      coalesceMs: 0,
    });
    const signal = (ask: TurnAsk) =>
      h.client.workflow.signalWithStart(TURN_KEEPER_WORKFLOW, {
        workflowId: c.keeper.workflowId,
        taskQueue: turnKeeperTaskQueue(h.taskQueue),
        args: keeperArgs,
        signal: askTurnSignal,
        signalArgs: [ask],
      });
    try {
      await signal(asks(holder, 'held'));
      await eventually(async () => ((await c.kept())?.holder?.messageId === 'held' ? true : undefined), 'the holder');
      await signal(asks(behind, 'queued'));
      const keeper = h.client.workflow.getHandle(c.keeper.workflowId);
      const firstRunId = (await keeper.describe()).runId;
      // Act: asks of other threads (runs that are gone: each go fails and the turn moves on) until it continues as new
      let sent = 0;
      while ((await keeper.describe()).runId === firstRunId) {
        assert.ok(sent < 400, `no continue-as-new after ${sent} asks`);
        await Promise.all(
          Array.from({ length: 8 }, () =>
            signal(
              asks(
                { workflowId: `gone-${randomUUID()}`, firstExecutionRunId: randomUUID() },
                randomUUID(),
                randomUUID(),
              ),
            ),
          ),
        );
        sent += 8;
      }
      // Assess: the run it left was short, and the next one knows the thread as it was
      const left = await h.client.workflow.getHandle(c.keeper.workflowId, firstRunId).describe();
      assert.equal(left.status.name, 'CONTINUED_AS_NEW');
      assert.ok(left.historyLength <= 400, `${left.historyLength} events in the run it left`);
      const kept = await c.kept();
      assert.equal(kept?.holder?.messageId, 'held');
      assert.deepEqual(
        kept.waiting.map((w) => w.messageId),
        ['queued'],
      );
    } finally {
      await holder.terminate('stand-in');
      await behind.terminate('stand-in');
    }
  });
});

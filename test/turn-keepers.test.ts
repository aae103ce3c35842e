import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import {
  askTurnSignal,
  INBOUND_MESSAGE_WORKFLOW,
  type InboundMessageResult,
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

describe('nothing lives only in a keeper', () => {
  test('every keeper terminated while threads wait: every message is still answered (its run asks again, the new keeper rebuilds its queue)', async () => {
    // Prepare: a harness whose burst window (15 s) outlasts the writing and the deciding on a busy machine; eight threads, two of them a burst of two
    const own = await Harness.start({ coalesceMs: 15_000, activityConfig: { TURN_REASK_MS: REASK_MS } });
    try {
      const threads = Array.from({ length: 8 }, () => ({ inboxId: own.newInbox(), threadId: randomUUID() }));
      const write = async (t: { inboxId: string; threadId: string }, text: string, from: string) => {
        const inbound = await own.sandbox.inbound({
          inbox_id: t.inboxId,
          thread_id: t.threadId,
          from,
          subject: 'Order',
          text,
        });
        return { inboxId: t.inboxId, messageId: inbound.message.message_id };
      };
      const refs = (
        await Promise.all(
          threads.map(async (t, i) => {
            const from = `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
            const first = await write(t, 'Where is my order?', from);
            return i < 2 ? [first, await write(t, 'It was order 42.', from)] : [first];
          }),
        )
      ).flat();
      const handle = (ref: MessageRef) => own.client.workflow.getHandle(inboundWorkflowId(ref));
      // Every message's run has asked its keeper (its ask is a signal-with-start) and none has ended
      const keeperQuery = `WorkflowType = '${TURN_KEEPER_WORKFLOW}' AND ExecutionStatus = 'Running' AND TaskQueue = '${turnKeeperTaskQueue(own.taskQueue)}'`;
      await eventually(async () => {
        const statuses = await Promise.all(
          refs.map(async (r) => ((await replyStatus(handle(r)).catch(() => [])) as string[])[0]),
        );
        // Waiting for the turn (or still deciding, on a busy machine): none has drafted or ended
        const waiting = statuses.filter((s) => s === 'waiting_turn').length;
        return waiting >= 8 && statuses.every((s) => s === 'waiting_turn' || s === 'deciding') ? true : undefined;
      }, 'the messages to wait for their turn');
      // Act: an operator terminates every keeper
      const keepers: string[] = [];
      for await (const run of own.client.workflow.list({ query: keeperQuery })) keepers.push(run.workflowId);
      assert.ok(keepers.length > 0, 'keepers ran');
      await Promise.all(
        keepers.map((id) => own.client.workflow.getHandle(id).terminate('an operator resets the keepers')),
      );
      // Assess: every message answered, each thread once
      const results: InboundMessageResult[] = [];
      for (const ref of refs) results.push(await within(90_000, own.workflowResult(ref, 90_000), ref.messageId));
      assert.deepEqual(results.map((r) => r.status).sort(), [
        'answered-together',
        'answered-together',
        ...Array<string>(8).fill('sent'),
      ]);
      for (const t of threads)
        assert.equal((await own.sandbox.outbox({ inbox_id: t.inboxId })).length, 1, 'one email a thread');
    } finally {
      await own.close();
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

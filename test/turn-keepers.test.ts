import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  WithStartWorkflowOperation,
  type WorkflowExecutionDescription,
  WorkflowUpdateFailedError,
  WorkflowNotFoundError,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import {
  KEEPER_TASK_TIMEOUT_MS,
  type MessageRef,
  NEWER_LISTED,
  queueTurnSignal,
  takeTurnUpdate,
  THREAD_WORKFLOW,
  type ThreadInput,
  type ThreadTurnRequest,
  threadTurnsQuery,
  TURN_KEEPER_WORKFLOW,
  turnKeeperTaskQueue,
  type TurnKeeperInput,
  TURN_UPDATE_WAIT_MS,
} from '../contract';
import { Worker } from '@temporalio/worker';
import { closedRuns, mayHaveTakenItsTurnAlone, newerUnanswered } from '../activities/turns/take-turn';
import { fetchMessageInThread, recentThread } from '../activities/agentmail/reads';
import { createAgentMailClient } from '../lib/agentmail';
import { connectTemporalWorker } from '../lib/temporal-connection';
import { promoteWhenPolling, workerBuildId } from '../worker/deployment';
import { testEnv } from './support/env';
import { inboundWorkflowId, threadTurnKeeper, threadWorkflowId } from '../lib/hashing';
import { temporal } from '@temporalio/proto';
import { Harness } from './support/harness';
import { startWorker } from './support/worker';
import { eventually } from './support/temporal';
import { replyStatus, within } from './support/workflow-watch';

// The turn keepers shared by many threads (workflows/turn-keeper.ts), with the burst window off
// (REPLY_COALESCE_MS=0, the harness's default): what makes a thread of one message cheap — its turn
// comes back as the Update's result, no signal — and what keeps a thread from wedging when the
// holder never says it is done (it says so only when someone waits), or closed without saying.

let h: Harness;
before(async () => {
  h = await Harness.start();
});
after(() => h.close());

function conversation(harness: Harness = h) {
  const inboxId = harness.newInbox();
  const threadId = randomUUID();
  const from = `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
  const keeper = threadTurnKeeper(inboxId, threadId, harness.taskQueue);
  return {
    harness,
    inboxId,
    threadId,
    keeper,
    /** `deliver: false`: the message is at AgentMail, but no webhook tells us (no run answers it). */
    async write(text: string, more: { deliver?: boolean } = {}): Promise<MessageRef> {
      const inbound = await harness.sandbox.inbound({
        inbox_id: inboxId,
        thread_id: threadId,
        from,
        subject: 'My order',
        text,
        ...(more.deliver === false ? { deliver: false } : {}),
      });
      return { inboxId, messageId: inbound.message.message_id };
    },
    kept: () => harness.client.workflow.getHandle(keeper.workflowId).query(threadTurnsQuery, keeper.threadKey),
  };
}

/** A run's workflow task timeout, as Temporal holds it. */
function taskTimeoutMs(description: WorkflowExecutionDescription): number {
  return optionalTsToMs(description.raw.executionConfig?.defaultWorkflowTaskTimeout) ?? 0;
}

/** The message workflow's history, as the signals it received and its length. */
async function historyOf(ref: MessageRef): Promise<{ length: number; signals: string[]; types: string[] }> {
  const events = (await h.client.workflow.getHandle(inboundWorkflowId(ref)).fetchHistory()).events ?? [];
  const signals = events.flatMap((e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? []);
  return { length: events.length, signals, types: events.map((e) => String(e.eventType)) };
}

async function isRunning(workflowId: string): Promise<boolean> {
  try {
    return (await h.client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** A run that stays open until the test ends it: it stands in for a message workflow holding a turn. */
async function standInRun(harness: Harness = h): Promise<WorkflowHandleWithFirstExecutionRunId> {
  const args: [ThreadInput] = [{ inboxId: 'stand-in', threadId: randomUUID() }];
  return harness.client.workflow.start(THREAD_WORKFLOW, {
    workflowId: `stand-in-${randomUUID()}`,
    taskQueue: harness.taskQueue,
    args,
  });
}

/** A turn request for a message of this conversation, from this run, past its burst window. */
function requestOf(
  c: ReturnType<typeof conversation>,
  run: { workflowId: string; runId: string },
  messageId: string,
  more: Partial<ThreadTurnRequest> = {},
): ThreadTurnRequest {
  return {
    threadKey: c.keeper.threadKey,
    inboxId: c.inboxId,
    threadId: c.threadId,
    workflowId: run.workflowId,
    runId: run.runId,
    messageId,
    timestampMs: Date.now() - 1_000,
    coalesceMs: 0,
    ...more,
  };
}

/** Asks the thread's keeper for a turn the way activities/turns/take-turn.ts does. */
async function ask(
  c: ReturnType<typeof conversation>,
  holder: { workflowId: string; runId: string },
  messageId: string,
  more: Partial<ThreadTurnRequest> = {},
  updateId?: string,
) {
  const args: [TurnKeeperInput] = [{ index: c.keeper.index }];
  return c.harness.client.workflow.executeUpdateWithStart(takeTurnUpdate, {
    args: [requestOf(c, holder, messageId, more)],
    ...(updateId === undefined ? {} : { updateId }),
    startWorkflowOperation: new WithStartWorkflowOperation(TURN_KEEPER_WORKFLOW, {
      workflowId: c.keeper.workflowId,
      taskQueue: turnKeeperTaskQueue(c.harness.taskQueue),
      args,
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  });
}

/** What the thread's keeper keeps of it: null when the keeper never heard of the thread (or never ran). */
async function keptOrNone(c: ReturnType<typeof conversation>) {
  return c.kept().catch((error: unknown) => {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  });
}

describe('a thread of one message is cheap', () => {
  test("a thread's only message takes its turn without asking: no signal, no waiting_turn, nothing at the keeper", async () => {
    // Prepare: count this inbox's reads at AgentMail (rules that delay by 0 ms only count)
    const c = conversation();
    await h.sandbox.setFaults([
      { match: { method: 'GET', path: `/v0/inboxes/${c.inboxId}/messages/` }, action: 'delay', ms: 0 },
      { match: { method: 'GET', path: `/v0/inboxes/${c.inboxId}/threads/` }, action: 'delay', ms: 0 },
    ]);
    // Act
    const ref = await c.write('Where is my order?');
    const result = await h.workflowResult(ref, 30_000);
    const [messageReads, threadReads] = (await h.sandbox.faults()).map((rule) => rule.hits);
    await h.sandbox.clearFaults();
    // Assess
    assert.equal(result.status, 'sent');
    // The decision read the message through its thread (the ingress's ThreadId), the turn took that
    // read, and the draft read the thread again (it must see what came since)
    assert.deepEqual({ messageReads, threadReads }, { messageReads: 0, threadReads: 2 });
    const history = await historyOf(ref);
    assert.deepEqual(history.signals, [], 'no signal');
    // 28 events before conversations; three more: the turn's local activity marker, and the patch's
    // marker and its TemporalChangeVersion upsert (the SDK's, for runs of builds after the patch).
    assert.ok(history.length <= 31, `${history.length} events: ${history.types.join(' ')}`);
    // The keeper never heard of the thread: nobody asked
    assert.equal(await keptOrNone(c), null);
  });

  test('the thread the ingress names is a hint: with a wrong one, or none, the decision still reads the message of its own thread', async () => {
    // Prepare: two threads; the messages are at AgentMail, nothing answers them
    const [c, other] = [conversation(), conversation()];
    const ref = await c.write('Where is my order?', { deliver: false });
    await other.write('Something else', { deliver: false });
    // Act / Assess: the message through its own thread, through another one, through none there is;
    // each with a client of its own, which has no read kept from an earlier one
    for (const hint of [c.threadId, other.threadId, randomUUID(), undefined]) {
      const agentmail = createAgentMailClient({ apiKey: h.apiKey, baseUrl: h.sandboxUrl, timeoutSeconds: 5 });
      const message = await fetchMessageInThread(agentmail, ref, hint);
      assert.equal(message.messageId, ref.messageId, `hint ${hint}`);
      assert.equal(message.threadId, c.threadId, `hint ${hint}`);
    }
  });

  test("the turn takes the decision's read of the thread only when it holds the message: a later one's turn reads again", async () => {
    // Prepare: count this inbox's thread reads; a client of our own, with nothing kept
    const c = conversation();
    await h.sandbox.setFaults({
      match: { method: 'GET', path: `/v0/inboxes/${c.inboxId}/threads/` },
      action: 'delay',
      ms: 0,
    });
    const agentmail = createAgentMailClient({ apiKey: h.apiKey, baseUrl: h.sandboxUrl, timeoutSeconds: 5 });
    const threadReads = async () => (await h.sandbox.faults())[0]!.hits;
    try {
      // Act: the first message's decision reads it through the thread, and its turn takes that read
      const first = await c.write('Where is my order?', { deliver: false });
      await fetchMessageInThread(agentmail, first, c.threadId);
      const forFirst = await recentThread(agentmail, { ...first, threadId: c.threadId }, 60_000);
      assert.equal(await threadReads(), 1, 'one read for the decision and the turn');
      assert.deepEqual(
        forFirst.thread.messages.map((m) => m.messageId),
        [first.messageId],
      );
      // A second message of the thread whose decision did not read the thread (its message was kept)
      const second = await c.write('Also, the address?', { deliver: false });
      const forSecond = await recentThread(agentmail, { ...second, threadId: c.threadId }, 60_000);
      // Assess: the kept read came before the second message, so its turn read the thread again
      assert.equal(await threadReads(), 2);
      assert.deepEqual(
        forSecond.thread.messages.map((m) => m.messageId),
        [first.messageId, second.messageId],
      );
      assert.ok(forSecond.readAt >= forFirst.readAt);
      // …and a read older than the turn accepts is not taken either
      await recentThread(agentmail, { ...second, threadId: c.threadId }, -1);
      assert.equal(await threadReads(), 3);
    } finally {
      await h.sandbox.clearFaults();
    }
  });

  test('a follow-up after that reply asks the keeper and takes its turn at once, also without a signal', async () => {
    // Prepare
    const c = conversation();
    const first = await c.write('Where is my order?');
    assert.equal((await h.workflowResult(first, 30_000)).status, 'sent');
    // Act
    const second = await c.write('Thanks. Can I change the address too?');
    const result = await h.workflowResult(second, 30_000);
    // Assess
    assert.equal(result.status, 'sent');
    assert.equal(result.status === 'sent' && result.covers.join(), second.messageId, 'its own reply');
    assert.deepEqual((await historyOf(second)).signals, []);
    const kept = await c.kept();
    assert.equal(kept?.holder?.messageId, second.messageId);
    assert.deepEqual(kept.waiting, []);
    // The follow-up's request started the keeper (the file's first), with the keepers' short task timeout
    assert.equal(
      taskTimeoutMs(await h.client.workflow.getHandle(c.keeper.workflowId).describe()),
      KEEPER_TASK_TIMEOUT_MS,
    );
  });
});

describe("a thread's only message, which took its turn without asking", () => {
  const at = (seconds: number) => new Date(Date.UTC(2026, 11, 3, 12, 0, seconds));
  const inbound = (messageId: string, seconds: number) => ({ messageId, timestamp: at(seconds), labels: ['received'] });
  const sent = (messageId: string, seconds: number) => ({ messageId, timestamp: at(seconds), labels: ['sent'] });

  test('is named by a later request only when it may have been alone: inbound, nothing sent, the next message after its window', () => {
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m2', 40), inbound('m1', 0)], 30_000), 'm1');
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m1', 0), inbound('m2', 30)], 30_000), 'm1', 'the window exactly');
    // Inside its window the next one came: it was never alone past its window, so it asked the keeper
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m1', 0), inbound('m2', 29)], 30_000), null);
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m1', 0), inbound('m2', 1)], 0), 'm1');
    // We replied in the thread: its first message was answered (a follow-up's draft sees that reply)
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m1', 0), sent('r', 5), inbound('m2', 40)], 0), null);
    // A thread that starts with a message of ours, or has one message only
    assert.equal(mayHaveTakenItsTurnAlone([sent('r', 0), inbound('m2', 40)], 0), null);
    assert.equal(mayHaveTakenItsTurnAlone([inbound('m1', 0)], 0), null);
  });

  test('is taken by the keeper as the holder a request names, so the request waits behind it until it closes', async () => {
    // Prepare: the thread's first message holds its turn without the keeper knowing
    const c = conversation();
    const [lone, asker] = [await standInRun(), await standInRun()];
    const run = (r: WorkflowHandleWithFirstExecutionRunId) => ({
      workflowId: r.workflowId,
      runId: r.firstExecutionRunId,
    });
    try {
      // Act: a later message asks, naming it
      const answer = await ask(c, run(asker), 'second', { loneHolder: { ...run(lone), messageId: 'first' } });
      // Assess: queued behind it; the first, if it asks now (say it had not yet), holds the turn
      assert.deepEqual(answer, { kind: 'queued', behind: run(lone) });
      assert.deepEqual(await ask(c, run(lone), 'first'), { kind: 'go', covers: ['first'] });
      assert.deepEqual(
        (await c.kept())?.waiting.map((w) => w.messageId),
        ['second'],
      );
      // …and once it closes (without a word: it never knew the keeper), the turn goes on
      await lone.terminate('a stand-in lone holder, closed');
      await eventually(
        async () => ((await c.kept())?.holder?.messageId === 'second' ? true : undefined),
        'the later message to hold the turn',
        30_000,
      );
    } finally {
      await lone.terminate('stand-in').catch(() => undefined);
      await asker.terminate('stand-in');
    }
  });

  test('is not taken as the holder when the asker found it closed, or the keeper knows a holder; a malformed one is refused', async () => {
    // Prepare
    const c = conversation();
    const [lone, asker, holder] = [await standInRun(), await standInRun(), await standInRun()];
    const run = (r: WorkflowHandleWithFirstExecutionRunId) => ({
      workflowId: r.workflowId,
      runId: r.firstExecutionRunId,
    });
    const loneHolder = { ...run(lone), messageId: 'first' };
    try {
      // Act: the named run is one the asker found closed (asking again, saying so)
      const free = await ask(c, run(asker), 'second', { loneHolder, closedHolderRunId: loneHolder.runId });
      // …a thread with a holder the keeper knows keeps it
      const d = conversation();
      await ask(d, run(holder), 'held');
      const behindKnown = await ask(d, run(asker), 'later', { loneHolder });
      const refused = await ask(conversation(), run(asker), 'x', {
        loneHolder: { workflowId: '', runId: 'r', messageId: 'm' },
      }).catch((error: unknown) => error);
      // Assess
      assert.deepEqual(free, { kind: 'go', covers: ['second'] });
      assert.deepEqual(behindKnown, { kind: 'queued', behind: run(holder) });
      assert.ok(refused instanceof WorkflowUpdateFailedError, String(refused));
    } finally {
      for (const r of [lone, asker, holder]) await r.terminate('stand-in').catch(() => undefined);
    }
  });
});

describe('a holder that never says it is done does not wedge its thread', () => {
  test('a message queued behind a holder that then closes without giving the turn back gets its turn', async () => {
    // Prepare: a run holds the thread's turn, and stays open
    const c = conversation();
    const holder = await standInRun();
    const holderRun = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    assert.deepEqual(await ask(c, holderRun, 'stand-in-message'), { kind: 'go', covers: ['stand-in-message'] });
    // (the thread's earlier message at AgentMail: a thread's only message would not ask)
    await c.write('Where is my order?', { deliver: false });
    // Act: a customer writes again; it must wait
    const ref = await c.write('Hello?');
    const message = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await eventually(
      async () =>
        ((await replyStatus(message).catch(() => undefined)) as string[] | undefined)?.[0] === 'waiting_turn' ||
        undefined,
      'the message waiting for its turn',
    );
    const waiting = await c.kept();
    assert.deepEqual(
      waiting?.waiting.map((w) => w.messageId),
      [ref.messageId],
    );
    // …and the holder closes without a word (an operator terminated it)
    await holder.terminate('a stand-in holder, closed without giving its turn back');
    // Assess: the keeper looks again (1 s, then twice as long each time) and the turn goes on
    const result = await within(30_000, h.workflowResult(ref, 30_000), 'the reply after the holder closed');
    assert.equal(result.status, 'sent');
    assert.equal((await c.kept())?.holder?.messageId, ref.messageId);
  });

  test('a repeated request from one run is answered alike; a malformed one is refused without touching the keeper', async () => {
    // Prepare
    const c = conversation();
    const holder = await standInRun();
    const run = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    try {
      // Act
      const first = await ask(c, run, 'm-1');
      const again = await ask(c, run, 'm-1');
      const other = await standInRun();
      const behind = await ask(c, { workflowId: other.workflowId, runId: other.firstExecutionRunId }, 'm-2');
      await other.terminate('stand-in');
      const refused = await ask(c, { workflowId: '', runId: '' }, 'm-3').catch((error: unknown) => error);
      // Assess
      assert.deepEqual(first, { kind: 'go', covers: ['m-1'] });
      assert.deepEqual(again, first);
      assert.deepEqual(behind, { kind: 'queued', behind: run }, 'told whom it waits behind');
      assert.ok(refused instanceof WorkflowUpdateFailedError, String(refused));
      assert.deepEqual(
        (await c.kept())?.waiting.map((w) => w.messageId),
        ['m-2'],
      );
    } finally {
      await holder.terminate('stand-in');
    }
  });
});

describe('a burst whose newer messages have not asked yet', () => {
  test("the thread's newer, unanswered messages as AgentMail has them: after this one and after our last reply", () => {
    const at = (seconds: number) => new Date(Date.UTC(2026, 11, 3, 12, 0, seconds));
    const inbound = (messageId: string, seconds: number) => ({
      messageId,
      timestamp: at(seconds),
      labels: ['received'],
    });
    const sent = (messageId: string, seconds: number) => ({ messageId, timestamp: at(seconds), labels: ['sent'] });
    const me = inbound('m2', 10);
    assert.deepEqual(newerUnanswered([inbound('m1', 5), me, inbound('m4', 30), inbound('m3', 20)], me), ['m3', 'm4']);
    // Our reply after m3 answered it (or the message that covered it): only what came after counts
    assert.deepEqual(newerUnanswered([me, inbound('m3', 20), sent('r', 25), inbound('m4', 30)], me), ['m4']);
    assert.deepEqual(newerUnanswered([me, inbound('m3', 20), sent('r', 25)], me), []);
    // The same timestamp: ordered by id, as the keeper orders a thread
    assert.deepEqual(newerUnanswered([inbound('a', 10), me, inbound('z', 10)], me), ['z']);
    // A long tail: the newest NEWER_LISTED
    const tail = Array.from({ length: NEWER_LISTED + 5 }, (_, i) => inbound(`n${String(i).padStart(2, '0')}`, 11 + i));
    const listed = newerUnanswered([me, ...tail], me);
    assert.equal(listed.length, NEWER_LISTED);
    assert.equal(listed.at(-1), tail.at(-1)?.messageId);
  });

  /**
   * Two runs of one thread, both written two minutes ago (their window long past): the older asks
   * first, naming the newer (AgentMail has it; its own request is not in yet), `meanwhile` runs, and
   * then the newer asks. Returns the turn the keeper then gives, once the newest holds it.
   */
  async function namedNewerAsksAfter(
    coalesceMs: number,
    meanwhile: (c: ReturnType<typeof conversation>) => Promise<void>,
  ) {
    const c = conversation();
    const [older, newer] = [await standInRun(), await standInRun()];
    const run = (r: WorkflowHandleWithFirstExecutionRunId) => ({
      workflowId: r.workflowId,
      runId: r.firstExecutionRunId,
    });
    const longAgo = Date.now() - 120_000;
    try {
      const first = await ask(c, run(older), 'older', { timestampMs: longAgo, coalesceMs, newer: ['newer'] });
      assert.deepEqual(first, { kind: 'queued' }, 'no turn yet, though the thread is free');
      await meanwhile(c);
      await ask(c, run(newer), 'newer', { timestampMs: longAgo + 1_000, coalesceMs });
      const kept = await eventually(
        async () => ((await c.kept())?.holder?.messageId === 'newer' ? c.kept() : undefined),
        'the newest message to hold the turn',
        10_000,
      );
      return kept?.holder;
    } finally {
      await older.terminate('stand-in');
      await newer.terminate('stand-in');
    }
  }

  test("a free thread's turn waits for the newer messages its request names; the newest to ask answers them all", async () => {
    const holder = await namedNewerAsksAfter(60_000, async (c) => {
      assert.deepEqual((await c.kept())?.expecting, ['newer']);
    });
    assert.deepEqual(holder?.covers, ['older', 'newer']);
  });

  test('a named newer message that asks after the burst window, while our workers are behind, is still answered with it', async () => {
    // A 2 s window, as short as a bench's; the newer asks only 5 s later (its worker was busy)
    const holder = await namedNewerAsksAfter(2_000, async (c) => {
      await sleep(5_000);
      assert.equal((await c.kept())?.holder ?? null, null, 'no turn given past the window');
    });
    assert.deepEqual(holder?.covers, ['older', 'newer']);
  });

  test('…and a named newer message that never asks (skipped, or far behind) holds it up for 20 s, no longer', async () => {
    const c = conversation();
    const older = await standInRun();
    try {
      const asked = Date.now();
      const first = await ask(c, { workflowId: older.workflowId, runId: older.firstExecutionRunId }, 'older', {
        timestampMs: asked - 120_000,
        coalesceMs: 2_000,
        newer: ['never-asks'],
      });
      assert.deepEqual(first, { kind: 'queued' });
      const kept = await eventually(
        async () => ((await c.kept())?.holder?.messageId === 'older' ? c.kept() : undefined),
        'the older message to get the turn',
        30_000,
      );
      assert.deepEqual(kept?.holder?.covers, ['older']);
      const waited = Date.now() - asked;
      assert.ok(waited >= 20_000, `not before 20 s had passed (${waited} ms)`);
    } finally {
      await older.terminate('stand-in');
    }
  });
});

describe('a busy keeper stays cheap to replay', () => {
  test('it continues as new in short runs, and the next run keeps who holds and who waits', async () => {
    // Prepare: a thread whose keeper this test starts (as an older build would: Temporal's default
    // task timeout), with a holder and a message queued behind it. The keepers are shared and the
    // earlier tests started some of them, so the thread is drawn until its keeper is not running.
    let c = conversation();
    while (await isRunning(c.keeper.workflowId)) c = conversation();
    const holder = await standInRun();
    const behind = await standInRun();
    const holderRun = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    try {
      assert.deepEqual(await ask(c, holderRun, 'held'), { kind: 'go', covers: ['held'] });
      const queued = await ask(c, { workflowId: behind.workflowId, runId: behind.firstExecutionRunId }, 'queued');
      assert.equal(queued.kind, 'queued');
      const keeper = h.client.workflow.getHandle(c.keeper.workflowId);
      const firstRunId = (await keeper.describe()).runId;
      // Act: other threads of the same keeper ask, each its turn at once (a lone message), until the
      // run has moved on. Under the first bound of 5,000 events that took some 1,250 requests.
      let requests = 0;
      const otherThread = () => {
        for (;;) {
          const other = conversation();
          if (other.keeper.index === c.keeper.index) return other;
        }
      };
      while ((await keeper.describe()).runId === firstRunId) {
        assert.ok(requests < 400, `the keeper's run had not continued as new after ${requests} requests`);
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            const run = { workflowId: `stand-in-${randomUUID()}`, runId: randomUUID() };
            assert.equal((await ask(otherThread(), run, randomUUID())).kind, 'go');
          }),
        );
        requests += 8;
      }
      // Assess: the run it left was short, and the next run knows the thread as it was
      const left = await h.client.workflow.getHandle(c.keeper.workflowId, firstRunId).describe();
      assert.equal(left.status.name, 'CONTINUED_AS_NEW');
      // This test started the keeper as an older build would, with Temporal's default task timeout;
      // the run it continued as is on the keepers' own.
      assert.equal(taskTimeoutMs(left), 10_000);
      assert.equal(taskTimeoutMs(await keeper.describe()), KEEPER_TASK_TIMEOUT_MS);
      // 150 events and the last workflow task's (requests that arrived while it ran are answered in it).
      assert.ok(left.historyLength <= 250, `${left.historyLength} events in the run it left`);
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

describe('the hand-over from builds with a keeper per thread', () => {
  test("a thread whose own keeper still runs (an older build's) keeps asking it, and the shared keeper never sees it", async () => {
    // Prepare: the thread's per-thread keeper, as an older build's message would have started it (the
    // thread's earlier message, answered by that build: at AgentMail, not delivered here)
    const c = conversation();
    await h.sandbox.inbound({
      inbox_id: c.inboxId,
      thread_id: c.threadId,
      from: `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`,
      subject: 'My order',
      text: 'Hello?',
      timestamp: new Date(Date.now() - 600_000).toISOString(),
      deliver: false,
    });
    const args: [ThreadInput] = [{ inboxId: c.inboxId, threadId: c.threadId }];
    const older = await h.client.workflow.start(THREAD_WORKFLOW, {
      workflowId: threadWorkflowId(c.inboxId, c.threadId),
      taskQueue: h.taskQueue,
      args,
    });
    try {
      // Act
      const ref = await c.write('Where is my order?');
      const result = await h.workflowResult(ref, 30_000);
      // Assess: answered through the older keeper (its turn by signal, given back by signal)
      assert.equal(result.status, 'sent');
      const history = await older.fetchHistory();
      const signals = (history.events ?? [])
        .map((e) => e.workflowExecutionSignaledEventAttributes?.signalName)
        .filter((name): name is string => typeof name === 'string');
      assert.deepEqual(signals, ['requestTurn', 'releaseTurn']);
      assert.deepEqual((await historyOf(ref)).signals, ['turn'], 'its turn came by signal');
      const shared = await h.client.workflow
        .getHandle(c.keeper.workflowId)
        .query(threadTurnsQuery, c.keeper.threadKey)
        .catch(() => null);
      assert.equal(shared, null);
    } finally {
      await older.terminate('test over');
    }
  });
});

describe('a turn request whose Update goes unanswered', () => {
  test('the same request by signal has the answer the Update was given told again, by signal', async () => {
    // Prepare: a run that asked by Update and got the turn (its local activity then stopped waiting)
    const c = conversation();
    const holder = await standInRun();
    const run = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    try {
      assert.deepEqual(await ask(c, run, 'asked'), { kind: 'go', covers: ['asked'] });
      // Act: it asks again by signal, as activities/turns/take-turn.ts does past TURN_UPDATE_WAIT_MS
      await h.client.workflow.getHandle(c.keeper.workflowId).signal(queueTurnSignal, requestOf(c, run, 'asked'));
      // Assess: the keeper tells it its turn by signal, and still names it the holder (nothing queued)
      assert.ok(await keeperSignalledTurn(c, run));
      const kept = await c.kept();
      assert.equal(kept?.holder?.runId, run.runId);
      assert.deepEqual(kept.waiting, []);
    } finally {
      await holder.terminate('stand-in');
    }
  });

  test('an Update that gives the turn late, after its run asked by signal (both in one task, the signal first): the turn is told by signal too', async () => {
    // Prepare: a worker of its own; a thread whose holder closed without giving the turn back, and a
    // run queued behind it
    const own = await Harness.start({ worker: false });
    let stop: (() => Promise<void>) | undefined = await startWorker(own);
    const c = conversation(own);
    const [holder, asker] = [await standInRun(own), await standInRun(own)];
    const held = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    const run = { workflowId: asker.workflowId, runId: asker.firstExecutionRunId };
    try {
      assert.deepEqual(await ask(c, held, 'held'), { kind: 'go', covers: ['held'] });
      assert.deepEqual(await ask(c, run, 'mine'), { kind: 'queued', behind: held });
      await holder.terminate('it closed without giving the turn back');

      // Act: as in the soak — the keeper's worker is gone; the run's second Update (its holder has
      // closed) is admitted but not answered; past TURN_UPDATE_WAIT_MS the run asks by signal and
      // waits for the `turn` signal; then a worker takes the keeper's task with both in it
      await stop();
      stop = undefined;
      const updateId = `turn-${run.runId}-after-${held.runId}`;
      const late = ask(c, run, 'mine', { closedHolderRunId: held.runId }, updateId);
      await eventually(() => updateAdmitted(own, c.keeper.workflowId, updateId), 'the late Update to be admitted');
      await own.client.workflow.getHandle(c.keeper.workflowId).signal(queueTurnSignal, requestOf(c, run, 'mine'));
      stop = await startWorker(own);

      // Assess: the Update's answer reaches nobody, and the run is told its turn by signal
      assert.deepEqual(await late, { kind: 'go', covers: ['mine'] });
      assert.ok(await keeperSignalledTurn(c, run));
      assert.equal((await c.kept())?.holder?.runId, run.runId);
    } finally {
      await asker.terminate('stand-in').catch(() => undefined);
      await stop?.();
      await own.close();
    }
  });

  test('a keeper that cannot answer in time: the message asks by signal, lets its task go, and gets its turn once the keeper is back', async () => {
    // Prepare: a worker of its own, and a thread whose keeper runs on a task queue nobody polls yet
    // (as while the worker holding it is dead and Temporal has not given its task to another)
    const own = await Harness.start({ worker: false });
    const stop = await startWorker(own);
    let keeperWorker: Worker | undefined;
    let keeperRunning: Promise<void> | undefined;
    const keeperQueue = `stalled-keeper-${randomUUID()}`;
    try {
      const { inboxId, ref, message, keeperRun: stalled } = await messageBehindKeeperOn(own, keeperQueue);

      // Act: the Update waits TURN_UPDATE_WAIT_MS for an answer that cannot come, then the request
      // goes by signal and the message's workflow task completes: it shows that it waits its turn
      await eventually(
        async () =>
          ((await replyStatus(message).catch(() => undefined)) as string[] | undefined)?.includes('waiting_turn')
            ? true
            : undefined,
        'the message to wait for its turn by signal',
        TURN_UPDATE_WAIT_MS + 20_000,
      );
      // …and the keeper's queue is polled again (by a worker of the keepers' build: they auto-upgrade)
      const connection = await connectTemporalWorker(testEnv.temporal);
      const version = { deploymentName: `stalled-keeper-${randomUUID().slice(0, 8)}`, buildId: workerBuildId() };
      keeperWorker = await Worker.create({
        connection,
        namespace: testEnv.namespace,
        taskQueue: keeperQueue,
        workerDeploymentOptions: { useWorkerVersioning: true, version, defaultVersioningBehavior: 'AUTO_UPGRADE' },
        ...(testEnv.workflowBundle
          ? { workflowBundle: { codePath: testEnv.workflowBundle } }
          : { workflowsPath: require.resolve('../workflows') }),
        activities: { closedRuns },
      });
      keeperRunning = keeperWorker.run().finally(() => connection.close());
      await promoteWhenPolling(own.client, version);

      // Assess: answered once, its turn told by signal (whatever the keeper made of the Update first)
      const result = await within(60_000, message.result(), 'the message to be answered');
      assert.equal(result.status, 'sent');
      assert.equal((await own.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length, 1);
      const signals = (await message.fetchHistory()).events?.flatMap(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName ?? [],
      );
      assert.ok(signals?.includes('turn'), `signals: ${signals?.join(', ')}`);
      await stalled.terminate('test over');
    } finally {
      keeperWorker?.shutdown();
      await keeperRunning;
      await stop();
      await own.close();
    }
  });
});

describe('a worker that stops while a message waits for its turn', () => {
  test("stops at once: the turn's local activity gives up its wait, and the next worker answers the message", async () => {
    // Prepare: a worker of its own, and a thread whose keeper cannot answer yet: its run is on a
    // task queue nobody polls, as when a worker's two queues stop together (the keeper's first)
    const own = await Harness.start({ worker: false });
    let stop: (() => Promise<void>) | undefined = await startWorker(own);
    try {
      const {
        inboxId,
        ref,
        message,
        keeper,
        keeperRun: stuck,
      } = await messageBehindKeeperOn(own, `nobody-polls-${randomUUID()}`);
      const runId = await eventually(
        async () => (await message.describe().catch(() => undefined))?.runId,
        'the message workflow to start',
      );
      await eventually(
        () => updateAdmitted(own, keeper.workflowId, `turn-${runId}`),
        'the turn request to reach the keeper',
      );

      // Act: stop the worker (as SIGTERM does) with the request in flight
      const stopping = stop();
      stop = undefined;

      // Assess: it stops (it used to wait for the keeper's answer forever), and the message is open
      await within(20_000, stopping, 'the worker to stop while a turn request is in flight');
      assert.equal((await message.describe()).status.name, 'RUNNING');
      // …until the next worker takes it up, and the keeper (back on its queue) answers it
      await stuck.terminate('its queue is polled again');
      stop = await startWorker(own);
      const result = await within(60_000, message.result(), 'the next worker to answer the message');
      assert.equal(result.status, 'sent');
      assert.equal(
        (await own.sandbox.outbox({ inbox_id: inboxId, in_reply_to: ref.messageId })).length,
        1,
        'one reply',
      );
      const events = (await message.fetchHistory()).events ?? [];
      assert.ok(
        events.some((e) => e.timerStartedEventAttributes),
        'the stopped step waited out its retry delay as a durable timer, not inside the workflow task',
      );
    } finally {
      await stop?.();
      await own.close();
    }
  });
});

/**
 * A thread whose shared keeper was started on `keeperQueue` (which nobody may poll yet: its worker
 * is dead, or its queues stopped), and then the thread's first message, which asks that keeper.
 */
async function messageBehindKeeperOn(own: Harness, keeperQueue: string) {
  const inboxId = own.newInbox();
  const threadId = randomUUID();
  const keeper = threadTurnKeeper(inboxId, threadId, own.taskQueue);
  const args: [TurnKeeperInput] = [{ index: keeper.index }];
  const keeperRun = await own.client.workflow.start(TURN_KEEPER_WORKFLOW, {
    workflowId: keeper.workflowId,
    taskQueue: keeperQueue,
    args,
  });
  const from = `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`;
  const message = { inbox_id: inboxId, thread_id: threadId, from, subject: 'My order' };
  // An earlier message of the thread that no run answers (no webhook told us of it): a thread's only
  // message takes its turn without asking, and these tests are about asking.
  await own.sandbox.inbound({ ...message, text: 'Hello', deliver: false });
  const inbound = await own.sandbox.inbound({ ...message, text: 'Where is my order?' });
  const ref = { inboxId, messageId: inbound.message.message_id };
  return { inboxId, ref, keeper, keeperRun, message: own.client.workflow.getHandle(inboundWorkflowId(ref)) };
}

/** The keeper's signal that tells this run its turn, once it is in the keeper's history. */
function keeperSignalledTurn(c: ReturnType<typeof conversation>, run: { runId: string }) {
  return eventually(async () => {
    const events = (await c.harness.client.workflow.getHandle(c.keeper.workflowId).fetchHistory()).events ?? [];
    return events.find(
      (e) =>
        e.signalExternalWorkflowExecutionInitiatedEventAttributes?.workflowExecution?.runId === run.runId &&
        e.signalExternalWorkflowExecutionInitiatedEventAttributes.signalName === 'turn',
    );
  }, 'the keeper to signal the run its turn');
}

/** Whether the Update has reached the workflow (admitted): NOT_FOUND until it has. */
function updateAdmitted(harness: Harness, workflowId: string, updateId: string): Promise<true | undefined> {
  return harness.client
    .withDeadline(Date.now() + 2_000, () =>
      harness.client.workflowService.pollWorkflowExecutionUpdate({
        namespace: harness.client.options.namespace,
        updateRef: { workflowExecution: { workflowId }, updateId },
        waitPolicy: {
          lifecycleStage:
            temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage
              .UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED,
        },
      }),
    )
    .then(
      () => true as const,
      () => undefined,
    );
}

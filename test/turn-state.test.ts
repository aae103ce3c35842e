import { burstOfSender, MAX_REASK_MS, reaskAfter, senderKey } from '../activities/turns/ask-turn';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TurnAnswer } from '../contract';
import {
  ask,
  due,
  emptyTurns,
  FIRST_POLL_MS,
  gone,
  holderToLook,
  idle,
  polled,
  release,
  type Tell,
  type ThreadTurns,
  type TurnAsk,
} from '../activities/turns/rule';

// The turn rule (activities/turns/rule.ts) without a server: examples, then random interleavings of
// asks, re-asks, releases, closes and lost signals against the invariant.

const WINDOW = 1_000;
const message = (id: string, timestampMs: number, sender = 'ada', threadId = 't1'): TurnAsk => ({
  inboxId: 'inbox',
  threadId,
  workflowId: `wf-${id}`,
  runId: `run-${id}`,
  messageId: id,
  timestampMs,
  sender,
  coalesceMs: WINDOW,
});
const grants = (tells: Tell[]) => tells.map((t) => `${t.runId.slice(4)}:${describeGrant(t.grant)}`);
const describeGrant = (g: TurnAnswer) =>
  g.kind === 'go' ? `go[${g.covers.join(',')}]` : g.kind === 'covered' ? `covered-by-${g.by}` : 'behind';

describe('the turn rule, by example', () => {
  test('a burst: once the newest is a window old it gets the turn for all; the others are covered only when its reply is sent', () => {
    const s = emptyTurns();
    ask(s, message('a', 0), 0);
    ask(s, message('b', 300), 300);
    assert.deepEqual(due(s, 1_200), [], 'the burst may go on');
    assert.deepEqual(grants(due(s, 1_300)), ['b:go[a,b]']);
    assert.deepEqual(
      s.waiting.map((w) => w.messageId),
      ['a'],
      'a waits for the reply',
    );
    assert.deepEqual(grants(release(s, 'run-b', { messageId: 'b', sender: 'ada', timestampMs: 300, sent: true })), [
      'a:covered-by-b',
    ]);
    assert.ok(idle(s), 'nobody holds or waits');
  });

  test('a covering run that ends without sending covers nothing: the others take their turn again', () => {
    const s = emptyTurns();
    ask(s, message('a', 0), 0);
    ask(s, message('b', 300), 300);
    due(s, 1_300);
    assert.deepEqual(release(s, 'run-b', { messageId: 'b', sender: 'ada', timestampMs: 300, sent: false }), []);
    assert.deepEqual(grants(due(s, 1_300)), ['a:go[a]']);
  });

  test('a holder that closes without a word (terminated) is found closed by the look; its burst takes the turn again', () => {
    const s = emptyTurns();
    ask(s, message('a', 0), 0);
    ask(s, message('b', 300), 300);
    due(s, 1_300);
    assert.equal(holderToLook(s, 1_300 + FIRST_POLL_MS - 1), null, 'not yet');
    assert.equal(holderToLook(s, 1_300 + FIRST_POLL_MS)?.runId, 'run-b');
    assert.deepEqual(polled(s, 'run-b', 'closed', 2_300), []);
    assert.deepEqual(grants(due(s, 2_300)), ['a:go[a]']);
  });

  test('a holder found closed before its release arrives, whose reply the store has sent, covers its burst as the release would', () => {
    const s = emptyTurns();
    ask(s, message('b', 300), 300);
    due(s, 1_300); // b holds alone; a asks behind it
    ask(s, message('a', 0), 1_400);
    assert.deepEqual(grants(polled(s, 'run-b', 'sent', 2_400)), ['a:covered-by-b']);
    assert.deepEqual(due(s, 2_400), [], 'a is answered: no turn of its own');
    assert.deepEqual(release(s, 'run-b', { messageId: 'b', sender: 'ada', timestampMs: 300, sent: true }), []);
  });

  test("bursts coalesce per sender: a Cc'd colleague never covers the customer's message", () => {
    const s = emptyTurns();
    ask(s, message('customer', 0, 'ada'), 0);
    ask(s, message('colleague', 200, 'grace'), 200);
    assert.deepEqual(grants(due(s, 1_300)), ['customer:go[customer]'], 'the oldest sender first, alone');
    release(s, 'run-customer', { messageId: 'customer', sender: 'ada', timestampMs: 0, sent: true });
    assert.deepEqual(grants(due(s, 1_300)), ['colleague:go[colleague]'], "then the colleague's own turn");
  });

  test('a repeated ask changes nothing and is told its answer again; a go to a run that is gone lets the turn go on', () => {
    const s = emptyTurns();
    ask(s, message('a', 0), 0);
    ask(s, message('a', 0), 500);
    assert.equal(s.waiting.length, 1);
    ask(s, message('b', 100, 'grace'), 100);
    assert.deepEqual(grants(due(s, 1_100)), ['a:go[a]']);
    assert.deepEqual(grants(ask(s, message('a', 0), 1_200)), ['a:go[a]']);
    gone(s, 'run-a');
    assert.deepEqual(grants(due(s, 1_200)), ['b:go[b]']);
  });
});

/** A small seeded PRNG (mulberry32): every failure names its seed and replays. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!,
  };
}

type RunState =
  | { kind: 'unasked' }
  | { kind: 'waiting' }
  | { kind: 'holding'; covers: string[] }
  | { kind: 'sent' }
  | { kind: 'not-sent' }
  | { kind: 'terminated' }
  | { kind: 'covered'; by: string };

function simulate(seed: number) {
  const r = prng(seed);
  const threads = ['t1', 't2'];
  const senders = ['ada', 'grace'];
  const messages = Array.from({ length: 4 + r.int(8) }, (_, i) =>
    message(`m${i}`, r.int(5_000), r.pick(senders), r.pick(threads)),
  );
  const runs = new Map<string, RunState>(messages.map((m) => [m.messageId, { kind: 'unasked' }]));
  const byId = new Map(messages.map((m) => [m.messageId, m]));
  const sentReplies: TurnAsk[] = [];
  /** Which sent replies answered each message: never two. */
  const answers = new Map<string, Set<string>>();
  const answeredBy = (id: string, reply: string) => {
    const replies = answers.get(id) ?? new Set<string>();
    replies.add(reply);
    answers.set(id, replies);
    if (replies.size > 1) fail(`${id} answered by two sent replies: ${[...replies].join(', ')}`);
  };
  /** Each thread's row. */
  const rows: Record<string, ThreadTurns> = Object.fromEntries(threads.map((t) => [t, emptyTurns()]));
  const threadOf = (id: string) => rows[byId.get(id)!.threadId]!;
  let now = 0;
  const trace: string[] = [];
  const fail = (what: string) => assert.fail(`seed ${seed}: ${what}\n${trace.join('\n')}`);

  /** Runs a turn was decided for (the order is checked once, when it is decided). */
  const granted = new Set<string>();
  const holding = (threadId: string) =>
    messages.filter((m) => m.threadId === threadId && runs.get(m.messageId)!.kind === 'holding');
  /**
   * Tells the runs their answers. The asking run's own comes back in its ask's result; every other is
   * a signal, which may be lost (a crash between the commit and the signal): that run hears it when
   * it asks again.
   */
  const deliver = (tells: Tell[], self?: string) => {
    for (const tell of tells) {
      const id = tell.runId.slice(4);
      const run = runs.get(id)!;
      if (tell.grant.kind === 'go' && !granted.has(id)) {
        // Turns in message-time order, checked when the turn is decided (it may be heard later): nobody
        // the row knows waits with an older message of another sender.
        granted.add(id);
        const oldest = Math.min(...tell.grant.covers.map((c) => byId.get(c)!.timestampMs));
        for (const w of threadOf(id).waiting)
          if (w.timestampMs < oldest && w.sender !== byId.get(id)!.sender)
            fail(`${id} went before older ${w.messageId}`);
      }
      if (id !== self && r.next() < 0.2) {
        trace.push(`  tell ${id} ${describeGrant(tell.grant)}: lost`);
        continue;
      }
      trace.push(`  tell ${id} ${describeGrant(tell.grant)}`);
      if (tell.grant.kind === 'behind') continue; // it shows that it waits; nothing else changes
      if (run.kind !== 'waiting') {
        // The run has ended (or holds already): a go cannot reach it, and the signal says so.
        if (tell.grant.kind === 'go' && run.kind !== 'holding') deliver(passOn(id));
        continue;
      }
      if (tell.grant.kind === 'go') {
        runs.set(id, { kind: 'holding', covers: tell.grant.covers });
        const threadId = byId.get(id)!.threadId;
        if (holding(threadId).length > 1) fail(`two holders in ${threadId}`);
      } else {
        const by = byId.get(tell.grant.by)!;
        const me = byId.get(id)!;
        if (!sentReplies.includes(by)) fail(`${id} covered by ${by.messageId}, whose reply was not sent`);
        if (by.sender !== me.sender || by.timestampMs < me.timestampMs || by.threadId !== me.threadId)
          fail(`${id} covered by ${by.messageId}, whose draft did not read it`);
        runs.set(id, { kind: 'covered', by: tell.grant.by });
        answeredBy(id, tell.grant.by);
      }
    }
  };
  /** A `go` that could not reach its run (closed): the turn goes on (activities/turns/ask-turn.ts `settle`). */
  const passOn = (id: string): Tell[] => {
    gone(threadOf(id), `run-${id}`);
    return due(threadOf(id), now);
  };
  // An ask (activities/turns/ask-turn.ts) first asks the store whether a sent reply of the same
  // sender, no older, read this message (every draft reads its sender's older messages here); then
  // it changes the thread's row (ask, then whatever turn is due), and looks at a holder whose look is due.
  const reask = (m: TurnAsk): Tell[] => {
    const answered = sentReplies
      .filter((r) => r.threadId === m.threadId && r.sender === m.sender && r.messageId !== m.messageId)
      .filter((r) => r.timestampMs > m.timestampMs || (r.timestampMs === m.timestampMs && r.messageId > m.messageId))
      .sort((a, b) => a.timestampMs - b.timestampMs);
    if (answered[0] !== undefined) {
      trace.push(`  ${m.messageId}: the store has a sent reply that read it (${answered[0].messageId})`);
      return [
        {
          workflowId: m.workflowId,
          runId: m.runId,
          grant: { kind: 'covered', by: answered[0].messageId },
        },
      ];
    }
    const row = rows[m.threadId]!;
    const tells = [...ask(row, m, now), ...due(row, now)];
    return [...tells, ...look(row)];
  };
  const look = (row: ThreadTurns): Tell[] => {
    const h = holderToLook(row, now);
    if (h === null) return [];
    const kind = runs.get(h.runId.slice(4))!.kind;
    const end = kind === 'holding' || kind === 'waiting' ? 'open' : kind === 'sent' ? 'sent' : 'closed';
    return [...polled(row, h.runId, end, now), ...due(row, now)];
  };
  /** Releases whose activity has not run yet (its worker died): a waiter's look at the holder may come first. */
  const late: Array<() => void> = [];
  const end = (m: TurnAsk, sent: boolean, releaseLate = false) => {
    const covers = (runs.get(m.messageId) as { covers?: string[] }).covers ?? [];
    runs.set(m.messageId, { kind: sent ? 'sent' : 'not-sent' });
    if (sent) {
      sentReplies.push(m);
      for (const id of covers) answeredBy(id, m.messageId);
    }
    const give = () =>
      deliver([
        ...release(rows[m.threadId]!, m.runId, {
          messageId: m.messageId,
          sender: m.sender,
          timestampMs: m.timestampMs,
          sent,
        }),
        ...due(rows[m.threadId]!, now),
      ]);
    if (releaseLate) late.push(give);
    else give();
  };

  for (let step = 0; step < 60; step++) {
    now += r.int(700);
    const choice = r.int(10);
    const of = (kind: RunState['kind']) => messages.filter((m) => runs.get(m.messageId)!.kind === kind);
    if (choice <= 2 && of('unasked').length > 0) {
      const m = r.pick(of('unasked'));
      trace.push(`${now} ask ${m.messageId} (${m.sender}@${m.timestampMs} in ${m.threadId})`);
      runs.set(m.messageId, { kind: 'waiting' });
      deliver(reask(m), m.messageId);
    } else if ((choice === 3 || choice === 6) && of('waiting').length > 0) {
      const m = r.pick(of('waiting'));
      trace.push(`${now} re-ask ${m.messageId}`);
      deliver(reask(m), m.messageId);
    } else if (choice === 4 && of('holding').length > 0) {
      const m = r.pick(of('holding'));
      const sent = r.next() < 0.7;
      const releaseLate = r.next() < 0.3;
      trace.push(`${now} ${m.messageId} ends, ${sent ? 'sent' : 'not sent'}${releaseLate ? ', its release late' : ''}`);
      end(m, sent, releaseLate);
    } else if (choice === 7 && late.length > 0) {
      trace.push(`${now} a late release arrives`);
      late.shift()!();
    } else if (choice === 5 && r.next() < 0.3) {
      const m = r.pick(messages.filter((x) => ['waiting', 'holding'].includes(runs.get(x.messageId)!.kind)).concat([]));
      if (m) {
        trace.push(`${now} terminate ${m.messageId}`);
        runs.set(m.messageId, { kind: 'terminated' });
      }
    } else {
      trace.push(`${now} time passes`);
    }
  }
  // Then everything settles: every waiting run asks again on its timer, holders send, time passes.
  // Nothing else moves a turn: there is no keeper, only asks and releases.
  for (const m of messages) if (runs.get(m.messageId)!.kind === 'unasked') runs.set(m.messageId, { kind: 'waiting' });
  for (let round = 0; round < 200; round++) {
    now += 1_000;
    trace.push(`${now} settle`);
    for (const m of messages) if (runs.get(m.messageId)!.kind === 'waiting') deliver(reask(m), m.messageId);
    late.splice(0).forEach((give) => give());
    for (const m of messages) if (runs.get(m.messageId)!.kind === 'holding') end(m, true);
    if (messages.every((m) => !['waiting', 'holding'].includes(runs.get(m.messageId)!.kind))) break;
  }
  for (const m of messages) {
    const run = runs.get(m.messageId)!;
    if (run.kind === 'waiting' || run.kind === 'holding') fail(`${m.messageId} still ${run.kind}`);
  }
  return { messages: messages.length, covered: [...runs.values()].filter((x) => x.kind === 'covered').length };
}

describe('the turn rule, over random interleavings of asks, re-asks, releases, closes and lost signals', () => {
  test('one holder per thread, turns in message-time order, every message answered, covered by a sent reply that read it, or ended visibly', () => {
    let covered = 0;
    let total = 0;
    for (let seed = 1; seed <= 2_000; seed++) {
      const result = simulate(seed);
      covered += result.covered;
      total += result.messages;
    }
    // The simulation exercised the cover: some messages were answered together.
    assert.ok(covered > total / 20, `${covered} of ${total} messages covered`);
  });
});

describe('a sender who has already written again', () => {
  test('waits for the newer message to ask (20 s at most), so the newest answers the burst', () => {
    const s = emptyTurns();
    ask(s, { ...message('a', 0), newer: ['b'] }, 5_000);
    assert.deepEqual(due(s, 6_000), [], 'waiting for b to ask');
    ask(s, message('b', 300), 7_000);
    assert.deepEqual(grants(due(s, 7_000)), ['b:go[a,b]']);
    const alone = emptyTurns();
    ask(alone, { ...message('a', 0), newer: ['never-asks'] }, 5_000);
    assert.deepEqual(due(alone, 24_999), []);
    assert.deepEqual(grants(due(alone, 25_000)), ['a:go[a]'], 'no longer than 20 s');
  });
});

describe('when a waiting run asks again (activities/turns/ask-turn.ts)', () => {
  test('when its turn is due, else TURN_REASK_MS after its wait began, then twice its last wait, up to 15 min', () => {
    assert.equal(reaskAfter(undefined, 60_000, undefined), 60_000, 'the first wait: TURN_REASK_MS');
    assert.equal(reaskAfter(undefined, 60_000, 1_000), 1_000, 'sooner when the holder is due a look');
    assert.equal(reaskAfter(undefined, 60_000, -5), 500, 'never at once');
    // Behind a reply that awaits approval for days: the looks double, and so do the asks.
    let wait = reaskAfter(undefined, 60_000, undefined);
    const waits = [wait];
    while (wait < MAX_REASK_MS) waits.push((wait = reaskAfter(wait, 60_000, undefined)));
    assert.deepEqual(waits, [60_000, 120_000, 240_000, 480_000, 900_000]);
    assert.equal(reaskAfter(MAX_REASK_MS, 60_000, undefined), MAX_REASK_MS, 'never longer than 15 min');
  });
});

describe('what an ask names (activities/turns/ask-turn.ts)', () => {
  test("the sender's other messages of the burst, older ones within the window too: asks whose windows end together race", () => {
    const at = (s: number) => new Date(Date.UTC(2026, 11, 5, 9, 0, s));
    const mail = (
      messageId: string,
      s: number,
      from = 'Ada <ada@customer.example>',
      labels: string[] = ['received'],
    ) => ({
      messageId,
      timestamp: at(s),
      labels,
      from,
      inReplyTo: undefined,
    });
    const thread = [
      mail('old', 0),
      mail('reply', 1, 'Support <support@ours.example>', ['sent']),
      mail('one', 10),
      mail('two', 12),
      mail('colleague', 12, 'Bo <bo@customer.example>'),
      mail('three', 13),
      mail('four', 30),
    ];
    const newest = thread[5]!;
    const sender = senderKey(newest);
    // The window is 5 s: "one" and "two" are of the newest message's burst, "old" is before our reply
    assert.deepEqual(burstOfSender(thread, newest, sender, 5_000), ['one', 'two', 'four']);
    assert.deepEqual(burstOfSender(thread, newest, sender, 2_000), ['two', 'four'], 'older only within the window');
  });
});

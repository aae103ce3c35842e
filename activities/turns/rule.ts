import type {
  HolderEnd,
  RunRef,
  ThreadTurns,
  TurnAsk,
  TurnAnswer,
  TurnGrant,
  TurnsState,
  TurnRelease,
  WaitingAsk,
} from '../../contract';

/**
 * The turn rule, as pure state changes (no Temporal, no database, no clock but `now`): each function
 * changes a thread's state and returns the answers to tell. The ask and the release
 * (activities/turns/ask-turn.ts) apply them to the thread's row under its lock (turn-table.ts) and
 * tell the answers by signal, so the rule is tested without a server (test/turn-state.test.ts).
 *
 * The rule: a thread has at most one holder. When its turn is free, the sender of its oldest waiting
 * message goes next: once that sender's newest waiting message is REPLY_COALESCE_MS old (the burst has
 * ended), that newest message gets `go`, answering all of the sender's waiting messages. The others
 * keep waiting until the holder gives the turn back: if its reply was sent, every waiting message of
 * that sender no newer than the holder's is `covered` (its draft read them); if not, they simply take
 * their turn again.
 */

/** An answer to tell a message's run. */
export interface Tell extends RunRef {
  threadKey: string;
  grant: TurnAnswer;
}

/** Answers kept for repeated asks, at most (a thread's row). */
const ANSWERED_KEPT = 100;
/** Behind a holder that may have closed without a word: the first look after this, then twice as long each time… */
export const FIRST_POLL_MS = 1_000;
/** …up to this (a turn behind a reply awaiting approval may be held for days). */
export const MAX_POLL_MS = 15 * 60 * 1000;
/**
 * A message whose sender has already written again (AgentMail has the newer message) waits this long
 * at most for that message to ask, so a burst whose webhooks come late is still answered once.
 */
export const NEWER_WAIT_MS = 20_000;

export const emptyState = (): TurnsState => ({ threads: {}, answered: {} });

const byTime = (a: { timestampMs: number; messageId: string }, b: { timestampMs: number; messageId: string }) =>
  a.timestampMs - b.timestampMs || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0);

/** A message's ask (its first, or a repeat on its timer). Returns the answer again to a run already answered. */
export function ask(state: TurnsState, request: TurnAsk, now: number): Tell[] {
  const run = { workflowId: request.workflowId, runId: request.runId, threadKey: request.threadKey };
  const known = state.answered[request.runId];
  if (known !== undefined) return [{ ...run, grant: known }];
  const thread = (state.threads[request.threadKey] ??= {
    inboxId: request.inboxId,
    threadId: request.threadId,
    holder: null,
    waiting: [],
  });
  if (thread.holder?.runId === request.runId) return [{ ...run, grant: { kind: 'go', covers: thread.holder.covers } }];
  // One workflow id has one open run: a new run of a message proves its earlier run has closed.
  if (thread.holder?.workflowId === request.workflowId) thread.holder = null;
  thread.waiting = thread.waiting.filter((w) => w.workflowId !== request.workflowId || w.runId === request.runId);
  const first = !thread.waiting.some((w) => w.runId === request.runId);
  if (first) {
    const { threadKey: _key, inboxId: _inbox, threadId: _thread, ...waiting } = request;
    // The burst window counts from the message's time, or from now for one dated in the future.
    thread.waiting.push({
      ...waiting,
      readyAtMs: Math.min(request.timestampMs, now) + request.coalesceMs,
      askedAtMs: now,
    });
  }
  schedulePoll(thread, now);
  // Behind a holder the wait may be long (a reply awaiting approval): the run is told, so it shows it waits.
  return first && thread.holder !== null ? [{ ...run, grant: { kind: 'behind' } }] : [];
}

/** The holder gave its turn back (`sent` or not), or closed without a word (`release` null: a look found it closed). */
export function release(
  state: TurnsState,
  threadKey: string,
  runId: string,
  released: Omit<TurnRelease, 'threadKey' | 'runId'> | null,
): Tell[] {
  const thread = state.threads[threadKey];
  if (thread === undefined) return [];
  const tells: Tell[] = [];
  if (released?.sent === true) {
    // Its draft read the sender's messages up to its own: those are answered, and only now (it was sent).
    const covered = thread.waiting.filter(
      (w) => w.sender === released.sender && w.runId !== runId && byTime(w, released) <= 0,
    );
    for (const w of covered) {
      const grant: TurnGrant = { kind: 'covered', by: released.messageId };
      remember(state, w.runId, grant);
      tells.push({ workflowId: w.workflowId, runId: w.runId, threadKey, grant });
    }
    thread.waiting = thread.waiting.filter((w) => !covered.includes(w));
  }
  if (thread.holder?.runId === runId) {
    // The holder has asked and is done: nobody waits for it to ask any more.
    const done = thread.holder.messageId;
    for (const w of thread.waiting) if (w.newer?.includes(done)) w.newer = w.newer.filter((id) => id !== done);
    thread.holder = null;
    delete thread.pollAtMs;
    delete thread.pollEveryMs;
  }
  forgetIfEmpty(state, threadKey);
  return tells;
}

/** The turns that may go now: every free thread whose next sender's burst has ended. */
export function due(state: TurnsState, now: number): Tell[] {
  const tells: Tell[] = [];
  for (const [threadKey, thread] of Object.entries(state.threads)) {
    const next = nextBatch(thread);
    if (next === null || next.readyAtMs > now) continue;
    const { holder, batch } = next;
    const grant: TurnGrant = { kind: 'go', covers: batch.map((w) => w.messageId) };
    thread.holder = {
      workflowId: holder.workflowId,
      runId: holder.runId,
      messageId: holder.messageId,
      covers: grant.covers,
      sender: holder.sender,
      timestampMs: holder.timestampMs,
    };
    thread.waiting = thread.waiting.filter((w) => w !== holder);
    schedulePoll(thread, now);
    tells.push({ workflowId: holder.workflowId, runId: holder.runId, threadKey, grant });
  }
  return tells;
}

/** A `go` could not be told: the run is gone (terminated). Its turn goes on. */
export function gone(state: TurnsState, threadKey: string, runId: string): void {
  release(state, threadKey, runId, null);
}

/** Holders someone waits behind whose look is due (with their message, whose reply the look asks after). */
export function holdersToPoll(
  state: TurnsState,
  now: number,
): Array<RunRef & { threadKey: string; inboxId: string; messageId: string }> {
  return Object.entries(state.threads).flatMap(([threadKey, t]) =>
    t.holder !== null && t.pollAtMs !== undefined && t.pollAtMs <= now
      ? [
          {
            threadKey,
            workflowId: t.holder.workflowId,
            runId: t.holder.runId,
            inboxId: t.inboxId,
            messageId: t.holder.messageId,
          },
        ]
      : [],
  );
}

/**
 * The look at a holder: still open → look again later (twice as long); closed → its turn goes on,
 * as its release would have said. A holder's release can come after the look that found it closed
 * (the look's answer is read first), so a closed holder whose reply our store has sent covers its
 * sender's waiting messages as a release with `sent` does: they are never answered a second time.
 */
export function polled(state: TurnsState, threadKey: string, runId: string, end: HolderEnd, now: number): Tell[] {
  const thread = state.threads[threadKey];
  const holder = thread?.holder;
  if (thread === undefined || holder?.runId !== runId) return [];
  if (end === 'sent')
    return release(state, threadKey, runId, {
      messageId: holder.messageId,
      sender: holder.sender,
      timestampMs: holder.timestampMs,
      sent: true,
    });
  if (end !== 'open') return release(state, threadKey, runId, null);
  thread.pollEveryMs = Math.min(2 * (thread.pollEveryMs ?? FIRST_POLL_MS), MAX_POLL_MS);
  thread.pollAtMs = now + thread.pollEveryMs;
  return [];
}

/** When the thread's turn must next be looked at (a burst ends, a holder's look is due), or undefined: nothing to wait for. */
export function nextWakeAt(state: TurnsState): number | undefined {
  const times = Object.values(state.threads).flatMap((t) => {
    if (t.holder !== null) return t.pollAtMs === undefined ? [] : [t.pollAtMs];
    const next = nextBatch(t);
    return next === null ? [] : [next.readyAtMs];
  });
  return times.length === 0 ? undefined : Math.min(...times);
}

/** The sender of the thread's oldest waiting message, and its messages: who would hold the turn next, and when. */
function nextBatch(thread: ThreadTurns): { holder: WaitingAsk; batch: WaitingAsk[]; readyAtMs: number } | null {
  if (thread.holder !== null || thread.waiting.length === 0) return null;
  const sorted = [...thread.waiting].sort(byTime);
  const sender = sorted[0]!.sender;
  const batch = sorted.filter((w) => w.sender === sender);
  const asked = new Set(batch.map((w) => w.messageId));
  const readyAt = (w: WaitingAsk) =>
    (w.newer ?? []).every((id) => asked.has(id)) ? w.readyAtMs : Math.max(w.readyAtMs, w.askedAtMs + NEWER_WAIT_MS);
  return { holder: batch[batch.length - 1]!, batch, readyAtMs: Math.max(...batch.map(readyAt)) };
}

/** Someone waits behind a holder: the holder is looked at now and then, from FIRST_POLL_MS on. */
function schedulePoll(thread: ThreadTurns, now: number): void {
  if (thread.holder === null || thread.waiting.length === 0) {
    delete thread.pollAtMs;
    delete thread.pollEveryMs;
  } else if (thread.pollAtMs === undefined) {
    thread.pollEveryMs = FIRST_POLL_MS;
    thread.pollAtMs = now + FIRST_POLL_MS;
  }
}

function forgetIfEmpty(state: TurnsState, threadKey: string): void {
  const thread = state.threads[threadKey];
  if (thread !== undefined && thread.holder === null && thread.waiting.length === 0) delete state.threads[threadKey];
}

function remember(state: TurnsState, runId: string, grant: TurnGrant): void {
  state.answered[runId] = grant;
  const runs = Object.keys(state.answered);
  for (const old of runs.slice(0, Math.max(0, runs.length - ANSWERED_KEPT))) delete state.answered[old];
}

import type { RunRef, TurnAnswer, TurnGrant } from '../../contract';

/**
 * The turn rule, as pure changes of one thread's state (no Temporal, no database, no clock but
 * `now`): each function changes the state and returns the answers to tell. The ask and the release
 * (ask-turn.ts) apply them to the thread's row under its lock (turn-table.ts) and tell the answers,
 * so the rule is tested without a server (test/turn-state.test.ts).
 *
 * The rule: a thread has at most one holder. When its turn is free, the sender of its oldest waiting
 * message goes next: once that sender's newest waiting message is REPLY_COALESCE_MS old (the burst has
 * ended), that newest message gets `go`, answering all of the sender's waiting messages. The others
 * keep waiting until the holder gives the turn back: if its reply was sent, every waiting message of
 * that sender no newer than the holder's is `covered` (its draft read them); if not, they simply take
 * their turn again. Ids, times and hashes only, never text or addresses.
 */

/** A message's ask for its thread's turn. */
export interface TurnAsk extends RunRef {
  /** Which conversation (ids, not text): for an operator reading the row. */
  inboxId: string;
  threadId: string;
  messageId: string;
  /** The message's timestamp at AgentMail (ms): the thread's order. */
  timestampMs: number;
  /** A hash of the sender's mailbox: bursts coalesce per sender, never across senders. */
  sender: string;
  /** REPLY_COALESCE_MS as the asking worker has it. */
  coalesceMs: number;
  /**
   * The same sender's other messages of this burst that AgentMail has (ids, at most 20): the newer
   * ones, and the older ones within the window. The turn waits a while for them to ask. (Named
   * `newer` since the field began with the newer ones only; the rule treats every id alike.)
   */
  newer?: string[];
}

/** A waiting ask: when its burst window ends (its time, or when it first asked if later, plus the window). */
export type WaitingAsk = Omit<TurnAsk, 'inboxId' | 'threadId'> & { readyAtMs: number; askedAtMs: number };

/** The holder gives its turn back; `sent`: its reply went out, so it covers its sender's waiting messages up to its own time. */
export interface TurnRelease {
  messageId: string;
  sender: string;
  timestampMs: number;
  sent: boolean;
}

/** One thread's turns: its row's `state` in `thread_turns`. */
export interface ThreadTurns {
  inboxId?: string;
  threadId?: string;
  holder: (RunRef & Omit<TurnRelease, 'sent'> & { covers: string[] }) | null;
  waiting: WaitingAsk[];
  /** While someone waits behind the holder: when the next ask looks at whether the holder's run is still open. */
  pollAtMs?: number;
  pollEveryMs?: number;
  /** Answers given lately, by run id: a repeated ask is told the same answer again. */
  answered: Record<string, TurnGrant>;
}

/** How a holder looked at stands: its run open, closed, or closed with its reply sent (by our store). */
export type HolderEnd = 'open' | 'closed' | 'sent';

/** An answer to tell a message's run. */
export interface Tell extends RunRef {
  grant: TurnAnswer;
}

/** Answers kept for repeated asks, at most. */
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

export const emptyTurns = (): ThreadTurns => ({ holder: null, waiting: [], answered: {} });

const byTime = (a: { timestampMs: number; messageId: string }, b: { timestampMs: number; messageId: string }) =>
  a.timestampMs - b.timestampMs || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0);

/** A message's ask (its first, or a repeat on its timer). Returns the answer again to a run already answered. */
export function ask(thread: ThreadTurns, request: TurnAsk, now: number): Tell[] {
  const { inboxId, threadId, ...waiting } = request;
  const run = { workflowId: request.workflowId, runId: request.runId };
  const known = thread.answered[request.runId];
  if (known !== undefined) return [{ ...run, grant: known }];
  thread.inboxId ??= inboxId;
  thread.threadId ??= threadId;
  if (thread.holder?.runId === request.runId) return [{ ...run, grant: { kind: 'go', covers: thread.holder.covers } }];
  // One workflow id has one open run: a new run of a message proves its earlier run has closed.
  if (thread.holder?.workflowId === request.workflowId) thread.holder = null;
  thread.waiting = thread.waiting.filter((w) => w.workflowId !== request.workflowId || w.runId === request.runId);
  const first = !thread.waiting.some((w) => w.runId === request.runId);
  if (first) {
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

/** The holder gave its turn back (`sent` or not), or closed without a word (`released` null: a look found it closed). */
export function release(thread: ThreadTurns, runId: string, released: TurnRelease | null): Tell[] {
  const tells: Tell[] = [];
  if (released?.sent === true) {
    // Its draft read the sender's messages up to its own: those are answered, and only now (it was sent).
    const covered = thread.waiting.filter(
      (w) => w.sender === released.sender && w.runId !== runId && byTime(w, released) <= 0,
    );
    for (const w of covered) {
      const grant: TurnGrant = { kind: 'covered', by: released.messageId };
      remember(thread, w.runId, grant);
      tells.push({ workflowId: w.workflowId, runId: w.runId, grant });
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
  return tells;
}

/** The turn that may go now, if the thread's is free and its next sender's burst has ended. */
export function due(thread: ThreadTurns, now: number): Tell[] {
  const next = nextBatch(thread);
  if (next === null || next.readyAtMs > now) return [];
  const { holder, batch } = next;
  const grant: TurnGrant = { kind: 'go', covers: batch.map((w) => w.messageId) };
  const { workflowId, runId, messageId, sender, timestampMs } = holder;
  thread.holder = { workflowId, runId, messageId, sender, timestampMs, covers: grant.covers };
  thread.waiting = thread.waiting.filter((w) => w !== holder);
  schedulePoll(thread, now);
  return [{ workflowId, runId, grant }];
}

/** A `go` could not be told: the run is gone (terminated). Its turn goes on. */
export function gone(thread: ThreadTurns, runId: string): void {
  release(thread, runId, null);
}

/** The holder someone waits behind, when its look is due. */
export function holderToLook(thread: ThreadTurns, now: number): (RunRef & { messageId: string }) | null {
  const { holder, pollAtMs } = thread;
  return holder !== null && pollAtMs !== undefined && pollAtMs <= now ? holder : null;
}

/**
 * The look at a holder: still open → look again later (twice as long); closed → its turn goes on,
 * as its release would have said. A holder's release can come after the look that found it closed
 * (the look's answer is read first), so a closed holder whose reply our store has sent covers its
 * sender's waiting messages as a release with `sent` does: they are never answered a second time.
 */
export function polled(thread: ThreadTurns, runId: string, end: HolderEnd, now: number): Tell[] {
  const holder = thread.holder;
  if (holder?.runId !== runId) return [];
  if (end === 'sent') {
    const { messageId, sender, timestampMs } = holder;
    return release(thread, runId, { messageId, sender, timestampMs, sent: true });
  }
  if (end !== 'open') return release(thread, runId, null);
  thread.pollEveryMs = Math.min(2 * (thread.pollEveryMs ?? FIRST_POLL_MS), MAX_POLL_MS);
  thread.pollAtMs = now + thread.pollEveryMs;
  return [];
}

/** When the thread's turn must next be looked at (a burst ends, a holder's look is due), or undefined: nothing to wait for. */
export function nextWakeAt(thread: ThreadTurns): number | undefined {
  if (thread.holder !== null) return thread.pollAtMs;
  return nextBatch(thread)?.readyAtMs;
}

/** Whether nobody holds the turn or waits (the row keeps only answers). */
export const idle = (thread: ThreadTurns): boolean => thread.holder === null && thread.waiting.length === 0;

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

function remember(thread: ThreadTurns, runId: string, grant: TurnGrant): void {
  thread.answered[runId] = grant;
  const runs = Object.keys(thread.answered);
  for (const old of runs.slice(0, Math.max(0, runs.length - ANSWERED_KEPT))) delete thread.answered[old];
}

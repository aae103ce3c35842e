import {
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  log,
  makeContinueAsNewFunc,
  patched,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import {
  KEEPER_ADOPTS_LONE_HOLDER_PATCH,
  KEEPER_LEAN_PATCH,
  KEEPER_RETELLS_PATCH,
  KEEPER_RUNS_OF_150_PATCH,
  KEEPER_SHORT_RUNS_PATCH,
  KEEPER_TASK_TIMEOUT_MS,
  KEEPER_TELLS_SIGNALLED_PATCH,
  KEEPER_WAITS_FOR_NAMED_PATCH,
  LOCAL_RETRY_THRESHOLD_MS,
  NEWER_LISTED,
  type TakeTurnAnswer,
  queueTurnSignal,
  takeTurnUpdate,
  type ThreadTurnRequest,
  type ThreadTurns,
  threadTurnDoneSignal,
  threadTurnsQuery,
  type TurnGrant,
  type TurnKeeperInput,
  type TurnKeeperState,
  turnWantedSignal,
} from '../contract';
import type { Activities } from '../activities';
import { tell } from './thread';

/**
 * The turn keeper shared by many threads: every AgentMail thread is hashed onto one of
 * TURN_KEEPERS of these (lib/hashing.ts threadTurnKeeper), and each hands out its threads' turns
 * one at a time, in the order of the messages' timestamps, like the per-thread keeper before it
 * (workflows/thread.ts, kept for the runs of older builds).
 *
 * What it saves: most threads are one message long, and a thread's only message, past its burst
 * window, does not ask at all (activities/turns/take-turn.ts): a later message of the thread names
 * its run while it is open, and the keeper takes it as the holder then (adoptLoneHolder). A message
 * of a longer thread whose turn is free (nobody holds it, nobody waits, its burst window has passed)
 * gets its turn as the *result* of the `takeTurn` Update its local activity sends: two events
 * here, sharing a workflow task with other threads' requests, and nothing in the message's history
 * but the local activity's marker. And the holder gives its turn back only when someone waits
 * behind it: the keeper tells it so (a `turnWanted` signal), and only then does it signal
 * `threadTurnDone`. So the keeper does not learn when a holder's reply is done: it records the
 * holder, and whether that run is still open matters only when another message of the thread asks.
 * That asker is told whom it waits behind and looks (activities/turns/take-turn.ts); the keeper
 * looks too, now and then, for the holders someone waits behind and for the threads it keeps (a
 * sweep).
 *
 * A burst is answered once, as before: a message that must wait is queued, and when the thread's
 * turn is free and REPLY_COALESCE_MS has passed since the newest waiting message, the newest is
 * signalled `go` covering all of them and the others `covered`. Ids and times only, never text.
 */

/** Answers given lately, kept so that a repeated request is answered alike (Update ids dedupe within a run only). */
const ANSWERED_KEPT = 1_000;
/** Behind a holder that may have closed without saying so: the first look after this, then twice as long each time. */
const FIRST_HOLDER_CHECK_MS = 1_000;
/** …up to this (a turn behind a reply awaiting approval may be held for days). */
const MAX_HOLDER_CHECK_MS = 15 * 60 * 1000;
/** Threads kept with a holder and nobody waiting: past this many, ask which holders closed and forget them. */
const SWEEP_AT = 256;
/**
 * How long a free thread's turn waits, at the least, for a newer message a request names (one that
 * AgentMail has) to ask for its turn, after each request. REPLY_COALESCE_MS is the time a customer's
 * burst has to end; this is the time our own workers may be behind on messages that already came.
 * Under the threads bench (100 bursts of five messages a second apart, 1,500 deliveries in 20 s on
 * two cores, a 5 s window) waiting only the window answered the bursts in 181–185 replies, their
 * requests reaching the keeper too far apart; waiting 20 s, in 100–101. A named message that never
 * asks (skipped: a robot, say) holds its thread up this long, no longer.
 */
const NAMED_NEWER_WAIT_MS = 20_000;
/** With nothing to do for this long the keeper sweeps, and ends once it keeps nothing; the next request starts it again. */
const IDLE_MS = 60 * 60 * 1000;
/**
 * A run continues as new past this many events, so that a worker that lost the keeper from its
 * cache (its predecessor was killed, or it just started) replays little before it answers. A
 * keeper's run is costly to replay for its length: each of its many small workflow tasks is an
 * activation of its own, about 1 ms an event on this project's machine when idle (a 382-event run
 * took 0.38–0.58 s). After a worker dies, the other replays every keeper the dead one held: under
 * the soak (a worker killed every 5 s) runs of up to 500 events kept two cores busy replaying
 * keepers. 150 events replay in about 0.15 s; the run's state travels in the next run's input.
 */
const KEEPER_RUN_EVENTS = 150;
/** The bounds of earlier builds (before KEEPER_RUNS_OF_150_PATCH; before KEEPER_SHORT_RUNS_PATCH), replayed as they ran. */
const KEEPER_SHORT_RUN_EVENTS = 500;
const OLD_KEEPER_RUN_EVENTS = 5_000;

const { closedRuns } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1 minute',
  localRetryThreshold: LOCAL_RETRY_THRESHOLD_MS,
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

export async function turnKeeperWorkflow(input: TurnKeeperInput): Promise<void> {
  const state: TurnKeeperState = input.state ?? { threads: {}, answered: {} };
  // Runs since this patch wait for the next request without a timer of their own, and do not keep a
  // `go` answer once given (its run holds the turn: knownAnswer finds it as the holder), so a lone
  // thread's request costs five events here, not seven, and the state a run hands on stays small.
  const lean = patched(KEEPER_LEAN_PATCH);
  let changes = 0;
  let lastChangeAt = Date.now();
  let sweepAt = SWEEP_AT;
  const changed = () => {
    changes++;
    lastChangeAt = Date.now();
  };
  // The Web UI's details are drawn once the loop has caught up with every change, not per request:
  // a busy workflow task carries many requests, and a replay draws every task again.
  let shown = -1;
  const show = () => {
    if (shown === changes) return;
    shown = changes;
    setCurrentDetails(turnKeeperDetails(state));
  };
  const threadOf = (request: ThreadTurnRequest): ThreadTurns =>
    (state.threads[request.threadKey] ??= {
      inboxId: request.inboxId,
      threadId: request.threadId,
      waiting: [],
      holder: null,
    });

  // Synchronous: an Update is in flight until it completes, and Temporal bounds the Updates in
  // flight per workflow (10 by default), so the keeper answers each in the workflow task it arrives in.
  setHandler(
    takeTurnUpdate,
    (request): TakeTurnAnswer => {
      const thread = threadOf(request);
      // This run asked by signal too: its local activity gave up waiting for an Update (perhaps for
      // this one, delivered late), so a turn given here is told by signal as well.
      const askedBySignal = thread.signalled?.includes(request.runId) ?? false;
      // The asker looked: the holder we named has closed (a closed run stays closed). The turn goes on.
      if (request.closedHolderRunId !== undefined && thread.holder?.runId === request.closedHolderRunId) {
        thread.holder = null;
        thread.holderTold = false;
        thread.waiting = thread.waiting.filter((w) => w.runId !== request.runId);
        changed();
      }
      const known = knownAnswer(state, request);
      if (known !== null) return known;
      forgetEarlierRun(thread, request);
      adoptLoneHolder(state, thread, request);
      if (
        thread.holder === null &&
        thread.waiting.length === 0 &&
        request.timestampMs + request.coalesceMs <= Date.now() &&
        (request.newer ?? []).length === 0
      ) {
        const grant: TurnGrant = { kind: 'go', covers: [request.messageId] };
        thread.holder = {
          workflowId: request.workflowId,
          runId: request.runId,
          messageId: request.messageId,
          covers: grant.covers,
        };
        thread.holderTold = false;
        if (!lean) remember(state, request.runId, grant);
        if (askedBySignal && patched(KEEPER_TELLS_SIGNALLED_PATCH)) {
          unmarkSignalled(thread, request.runId);
          (state.retell ??= []).push({ threadKey: request.threadKey, ...runOf(request), grant });
        }
        changed();
        return grant;
      }
      enqueue(thread, request);
      changed();
      return thread.holder === null
        ? { kind: 'queued' }
        : { kind: 'queued', behind: { workflowId: thread.holder.workflowId, runId: thread.holder.runId } };
    },
    { validator: validateRequest },
  );
  // A message inside its burst window, or one whose Update went unanswered for too long: queued
  // without an answer (the loop signals its turn). A repeated one (its activity retried) changes
  // nothing: its answer, if any, has been signalled (or is told again, below).
  setHandler(queueTurnSignal, (request) => {
    try {
      validateRequest(request);
    } catch (error) {
      log.warn('a malformed turn request was ignored', { error: String(error) });
      return;
    }
    const known = knownAnswer(state, request);
    if (known !== null) {
      // The run asked by Update first and stopped waiting for the answer (activities/turns/take-turn.ts):
      // an answer given to that Update reached nobody, so it is told again, by signal.
      if (known.kind !== 'queued' && patched(KEEPER_RETELLS_PATCH)) {
        (state.retell ??= []).push({ threadKey: request.threadKey, ...runOf(request), grant: known });
        changed();
      }
      // Still waiting: its turn comes by signal, whoever gives it.
      if (known.kind === 'queued') markSignalled(threadOf(request), request.runId);
      return;
    }
    const thread = threadOf(request);
    forgetEarlierRun(thread, request);
    adoptLoneHolder(state, thread, request);
    enqueue(thread, request);
    markSignalled(thread, request.runId);
    changed();
  });
  setHandler(threadTurnDoneSignal, ({ threadKey, runId }) => {
    const thread = state.threads[threadKey];
    if (thread?.holder?.runId !== runId) return;
    thread.holder = null;
    changed();
  });
  setHandler(threadTurnsQuery, (threadKey) => state.threads[threadKey] ?? null);

  let idleTimer: Promise<void> | undefined;
  for (;;) {
    if (state.retell !== undefined && state.retell.length > 0) {
      await retellAnswers(state);
      changed();
      continue;
    }
    const now = Date.now();
    const entries = Object.entries(state.threads);
    // Free turns whose burst window has passed go out, every such thread at once.
    const due = entries.filter(([, t]) => t.holder === null && t.waiting.length > 0 && readyAt(t) <= now);
    if (due.length > 0) {
      await Promise.all(due.map(([, thread]) => handOut(state, thread, lean)));
      changed();
      continue;
    }
    // Holders someone waits behind, not heard from: still open?
    const toCheck = entries.filter(
      ([, t]) => t.holder !== null && t.waiting.length > 0 && (t.checkAtMs ?? Infinity) <= now,
    );
    if (toCheck.length > 0) {
      await checkHolders(toCheck.map(([, t]) => t));
      changed();
      continue;
    }
    for (const [key, t] of entries) if (t.holder === null && t.waiting.length === 0) delete state.threads[key];
    const lone = Object.values(state.threads).filter((t) => t.holder !== null && t.waiting.length === 0);
    if (lone.length >= sweepAt) {
      await forgetClosed(state);
      sweepAt = Math.max(SWEEP_AT, 2 * Object.keys(state.threads).length);
      changed();
      continue;
    }
    if (historyIsLong()) {
      await condition(allHandlersFinished);
      // With the keepers' task timeout named: a keeper an older build started carried Temporal's
      // default from run to run (a continued run inherits it).
      return makeContinueAsNewFunc<typeof turnKeeperWorkflow>({ workflowTaskTimeout: KEEPER_TASK_TIMEOUT_MS })({
        ...input,
        state,
      });
    }
    const wakes = Object.values(state.threads).flatMap((t) =>
      t.waiting.length === 0 ? [] : [t.holder === null ? readyAt(t) : (t.checkAtMs ?? Infinity)],
    );
    const wakeMs = Math.min(IDLE_MS, ...wakes.map((at) => at - now));
    show();
    const seen = changes;
    if (lean && wakes.length === 0) {
      // Nothing to wake for but an idle hour: one timer for it, started once and moved on only when it
      // fires (two events an hour, where a timer started and cancelled per wait cost two a request).
      idleTimer ??= sleep(Math.max(1, lastChangeAt + IDLE_MS - Date.now()));
      let fired = false;
      await Promise.race([
        condition(() => changes !== seen),
        idleTimer.then(() => {
          fired = true;
        }),
      ]);
      if (!fired) continue;
      idleTimer = undefined;
      if (Date.now() - lastChangeAt < IDLE_MS) continue; // not idle for an hour: the next timer counts from the last change
      await forgetClosed(state);
      await condition(allHandlersFinished);
      if (Object.keys(state.threads).length === 0 && changes === seen) return;
      changed();
      continue;
    }
    if (!(await condition(() => changes !== seen, Math.max(wakeMs, 1))) && wakes.length === 0) {
      // An idle hour: forget the holders that closed; with nothing left, end (the next request starts a new run).
      await forgetClosed(state);
      await condition(allHandlersFinished);
      if (Object.keys(state.threads).length === 0 && changes === seen) return;
      changed();
    }
  }
}

/**
 * The keeper follows the current build (it outlives any one build, and every build's message runs
 * ask it): a change to this file is guarded with patched() (docs/changing-the-workflow.md).
 */
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, turnKeeperWorkflow);

/**
 * One workflow id has one open run at a time: a request from a new run of a message whose earlier
 * run holds (or waits for) the turn proves that run has closed (an operator's rerun).
 */
function forgetEarlierRun(thread: ThreadTurns, request: ThreadTurnRequest): void {
  if (thread.holder?.workflowId === request.workflowId) thread.holder = null;
  for (const w of thread.waiting) if (w.workflowId === request.workflowId) unmarkSignalled(thread, w.runId);
  thread.waiting = thread.waiting.filter((w) => w.workflowId !== request.workflowId);
}

/**
 * A thread whose turn looks free may have a holder after all: its first message, as the thread's
 * only one, took its turn without asking (activities/turns/take-turn.ts). A request names that run
 * while it is open (`loneHolder`); unless the keeper knows it (waiting, or answered), it becomes the
 * holder and this request waits behind it. It is told that someone waits and looked at now and then,
 * as any holder is (enqueue, checkHolders), so a run that closed meanwhile holds the turn a moment
 * at most. Requests of builds before this one name none.
 */
function adoptLoneHolder(state: TurnKeeperState, thread: ThreadTurns, request: ThreadTurnRequest): void {
  const lone = request.loneHolder;
  if (thread.holder !== null || lone === undefined) return;
  if (
    lone.runId === request.closedHolderRunId ||
    lone.workflowId === request.workflowId ||
    state.answered[lone.runId] !== undefined ||
    thread.waiting.some((w) => w.workflowId === lone.workflowId)
  )
    return;
  if (!patched(KEEPER_ADOPTS_LONE_HOLDER_PATCH)) return;
  thread.holder = {
    workflowId: lone.workflowId,
    runId: lone.runId,
    messageId: lone.messageId,
    covers: [lone.messageId],
  };
  thread.holderTold = false;
}

const runOf = (request: ThreadTurnRequest) => ({ workflowId: request.workflowId, runId: request.runId });

function markSignalled(thread: ThreadTurns, runId: string): void {
  if (!(thread.signalled ?? []).includes(runId)) (thread.signalled ??= []).push(runId);
}

function unmarkSignalled(thread: ThreadTurns, runId: string): void {
  thread.signalled = (thread.signalled ?? []).filter((id) => id !== runId);
  if (thread.signalled.length === 0) delete thread.signalled;
}

/** Queues a request for the loop to hand out once the thread's turn is free and its burst has ended. */
function enqueue(thread: ThreadTurns, request: ThreadTurnRequest): void {
  thread.waiting.push(request);
  // The burst may still be going on: the turn waits until the newest message is REPLY_COALESCE_MS
  // old (by its own timestamp, so a catch-up of old mail waits for nothing; capped from now, so a
  // message dated in the future cannot hold its thread).
  const newest = Math.max(...thread.waiting.map((w) => w.timestampMs));
  const coalesceMs = Math.max(...thread.waiting.map((w) => w.coalesceMs));
  thread.readyAtMs = Math.min(newest + coalesceMs, Date.now() + coalesceMs);
  // Newer messages of the thread that are at AgentMail and have not asked yet (the workers are behind,
  // or their webhooks are late): the turn waits for them as well, after each request for
  // REPLY_COALESCE_MS or NAMED_NEWER_WAIT_MS, whichever is longer (none when the window is 0), so
  // the newest answers them all. Requests of builds before `newer` name none.
  const asked = new Set([
    ...thread.waiting.map((w) => w.messageId),
    ...(thread.holder === null ? [] : thread.holder.covers),
  ]);
  const expecting = [...new Set([...(thread.expecting ?? []), ...(request.newer ?? [])])].filter(
    (id) => !asked.has(id),
  );
  if (expecting.length > 0) {
    thread.expecting = expecting;
    const waitMs =
      coalesceMs > 0 && patched(KEEPER_WAITS_FOR_NAMED_PATCH) ? Math.max(coalesceMs, NAMED_NEWER_WAIT_MS) : coalesceMs;
    thread.expectUntilMs = Date.now() + waitMs;
  } else {
    delete thread.expecting;
    delete thread.expectUntilMs;
  }
  // Behind a holder: it is told that someone waits (by the loop's look), and looked at now and then
  // in case it closed without a word.
  if (thread.holder !== null && thread.checkAtMs === undefined) {
    thread.checkEveryMs = FIRST_HOLDER_CHECK_MS;
    thread.checkAtMs = Date.now() + FIRST_HOLDER_CHECK_MS;
  }
}

/** When a free thread's waiting messages may have the turn: their burst has ended, and the newer messages named have asked or been waited for. */
function readyAt(thread: ThreadTurns): number {
  const burstEnds = thread.readyAtMs ?? 0;
  return thread.expecting === undefined ? burstEnds : Math.max(burstEnds, thread.expectUntilMs ?? 0);
}

function knownAnswer(state: TurnKeeperState, request: ThreadTurnRequest): TakeTurnAnswer | null {
  const thread = state.threads[request.threadKey];
  if (thread?.holder?.runId === request.runId) return { kind: 'go', covers: thread.holder.covers };
  if (thread?.waiting.some((w) => w.runId === request.runId)) return { kind: 'queued' };
  return state.answered[request.runId] ?? null;
}

function remember(state: TurnKeeperState, runId: string, grant: TurnGrant): void {
  state.answered[runId] = grant;
  const runs = Object.keys(state.answered);
  for (const old of runs.slice(0, Math.max(0, runs.length - ANSWERED_KEPT))) delete state.answered[old];
}

/** The newest waiting message gets the turn and answers them all; the others are covered by it. */
async function handOut(state: TurnKeeperState, thread: ThreadTurns, lean: boolean): Promise<void> {
  const batch = [...thread.waiting].sort(
    (a, b) => a.timestampMs - b.timestampMs || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0),
  );
  thread.waiting = [];
  delete thread.readyAtMs;
  delete thread.checkAtMs;
  delete thread.checkEveryMs;
  delete thread.expecting;
  delete thread.expectUntilMs;
  delete thread.signalled; // every one of them is told by signal below
  const holder = batch[batch.length - 1]!;
  const covers = batch.map((r) => r.messageId);
  thread.holder = { workflowId: holder.workflowId, runId: holder.runId, messageId: holder.messageId, covers };
  thread.holderTold = false;
  if (!lean) remember(state, holder.runId, { kind: 'go', covers });
  for (const r of batch.slice(0, -1)) remember(state, r.runId, { kind: 'covered', by: holder.messageId });
  // In one batch with the others, so the check of a holder that is gone starts from its own answer.
  const [given] = await Promise.all([
    tell(holder, { kind: 'go', covers }),
    ...batch.slice(0, -1).map((r) => tell(r, { kind: 'covered', by: holder.messageId })),
  ]);
  if (!given && thread.holder?.runId === holder.runId) thread.holder = null;
}

/** Tells again, by signal, the answers whose run stopped waiting for its Update's result. */
async function retellAnswers(state: TurnKeeperState): Promise<void> {
  const batch = state.retell ?? [];
  state.retell = [];
  await Promise.all(
    batch.map(async ({ threadKey, grant, ...run }) => {
      const told = await tell(run, grant);
      // A holder that is gone holds nothing: the thread's turn goes on.
      const thread = state.threads[threadKey];
      if (!told && thread?.holder?.runId === run.runId) thread.holder = null;
    }),
  );
}

/**
 * Asks whether the holders that others wait behind are still open: a closed one's turn goes on; an
 * open one is told that someone waits (once), so it says when it is done. Not at once when someone
 * queues: the asker looks first (activities/turns/take-turn.ts), and a follow-up to a reply sent
 * long ago is answered by its own Update, with no signal either way.
 */
async function checkHolders(threads: ThreadTurns[]): Promise<void> {
  const holders = threads.map((t) => t.holder!);
  const closed = await closedRuns({ runs: holders });
  const tell: Array<Promise<void>> = [];
  threads.forEach((thread, i) => {
    const holder = holders[i]!;
    if (thread.holder !== holder) return;
    if (closed[i] === true) {
      log.warn('the run holding a turn closed without giving it back: the turn goes on', {
        holderWorkflowId: holder.workflowId,
      });
      thread.holder = null;
      thread.holderTold = false;
      return;
    }
    thread.checkEveryMs = Math.min(2 * (thread.checkEveryMs ?? FIRST_HOLDER_CHECK_MS), MAX_HOLDER_CHECK_MS);
    thread.checkAtMs = Date.now() + thread.checkEveryMs;
    if (thread.holderTold !== true) {
      thread.holderTold = true;
      tell.push(
        getExternalWorkflowHandle(holder.workflowId, holder.runId)
          .signal(turnWantedSignal)
          .catch(() => {
            // It closed in between: the next look, soon, finds it so.
            if (thread.holder === holder) thread.checkAtMs = Date.now() + FIRST_HOLDER_CHECK_MS;
          }),
      );
    }
  });
  await Promise.all(tell);
}

/** Forgets the threads whose holder has closed and nobody waits: all a finished lone thread leaves behind. */
async function forgetClosed(state: TurnKeeperState): Promise<void> {
  const lone = Object.entries(state.threads).filter(([, t]) => t.holder !== null && t.waiting.length === 0);
  if (lone.length === 0) return;
  const holders = lone.map(([, t]) => t.holder!);
  const closed = await closedRuns({ runs: holders });
  lone.forEach(([key, thread], i) => {
    if (closed[i] === true && thread.holder === holders[i] && thread.waiting.length === 0) delete state.threads[key];
  });
}

function validateRequest(request: ThreadTurnRequest): void {
  const strings = [
    request.threadKey,
    request.inboxId,
    request.threadId,
    request.workflowId,
    request.runId,
    request.messageId,
  ];
  if (!strings.every((s) => typeof s === 'string' && s.length > 0 && s.length <= 1_000))
    throw new Error('a turn request names its thread, inbox, workflow, run and message');
  if (!Number.isFinite(request.timestampMs) || !Number.isFinite(request.coalesceMs) || request.coalesceMs < 0)
    throw new Error('a turn request carries its message timestamp and burst window in ms');
  const newer = request.newer;
  if (
    newer !== undefined &&
    !(
      Array.isArray(newer) &&
      newer.length <= NEWER_LISTED &&
      newer.every((id) => typeof id === 'string' && id.length > 0 && id.length <= 1_000)
    )
  )
    throw new Error(`a turn request names at most ${NEWER_LISTED} newer messages, by id`);
  const lone = request.loneHolder;
  if (
    lone !== undefined &&
    !(
      typeof lone === 'object' &&
      lone !== null &&
      [lone.workflowId, lone.runId, lone.messageId].every(
        (s) => typeof s === 'string' && s.length > 0 && s.length <= 1_000,
      )
    )
  )
    throw new Error('a turn request names its lone holder by workflow, run and message');
}

function historyIsLong(): boolean {
  const info = workflowInfo();
  if (info.continueAsNewSuggested) return true;
  // Each patch is asked only once a run is past its bound: a run of an older build that never
  // reached it recorded no marker, and one replayed from before the patch sees none and keeps the
  // bound it ran with.
  const length = info.historyLength;
  if (length > KEEPER_RUN_EVENTS && patched(KEEPER_RUNS_OF_150_PATCH)) return true;
  if (length > KEEPER_SHORT_RUN_EVENTS && patched(KEEPER_SHORT_RUNS_PATCH)) return true;
  return length > OLD_KEEPER_RUN_EVENTS;
}

/** Threads listed in the Web UI's Current details, at most. */
const DETAILS_THREADS = 30;

/** The Web UI's "Current details": for each thread with a turn held or waited for, whose turn it is. Ids only. */
export function turnKeeperDetails(state: TurnKeeperState): string {
  const id = (text: string) => `\`${text.replace(/[`\r\n|]/g, ' ')}\``;
  const threads = Object.values(state.threads);
  const waited = threads.filter((t) => t.waiting.length > 0);
  const lines = [
    `**Threads**: ${threads.length} kept, ${waited.length} with messages waiting for their turn`,
    '',
    '| thread | turn | waiting |',
    '|---|---|---|',
  ];
  // Threads someone waits in first: those are the ones a person looks for.
  for (const t of [...waited, ...threads.filter((t) => t.waiting.length === 0)].slice(0, DETAILS_THREADS)) {
    const turn = t.holder
      ? id(t.holder.messageId) + (t.holder.covers.length > 1 ? ` (answering ${t.holder.covers.length})` : '')
      : 'nobody';
    const waiting = [...t.waiting].sort((a, b) => a.timestampMs - b.timestampMs).map((w) => id(w.messageId));
    const expecting = t.expecting?.length ? ` (and ${t.expecting.length} newer, not asked yet)` : '';
    lines.push(`| ${id(t.inboxId)} ${id(t.threadId)} | ${turn} | ${waiting.join(', ')}${expecting} |`);
  }
  if (threads.length > DETAILS_THREADS)
    lines.push('', `…and ${threads.length - DETAILS_THREADS} more (query \`threadTurns\` with a thread's key)`);
  return lines.join('\n');
}

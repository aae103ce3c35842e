import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import {
  releaseTurnSignal,
  type ThreadInput,
  type ThreadState,
  threadStateQuery,
  type TurnGrant,
  turnRequestSignal,
  turnSignal,
} from '../contract';
import type { Activities } from '../activities';

const { turnHolderOpen } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute' },
});

/**
 * A conversation's turn keeper: one per AgentMail thread (its id from inbox_id + thread_id), the
 * mutex / entity pattern of Temporal's samples. Message workflows that owe a reply ask for their
 * turn by signal-with-start (activities/turns/request-turn.ts); it hands out one turn at a time,
 * in the order of the messages' timestamps, so a follow-up's draft sees our reply to the message
 * before it. A burst is answered once: while a turn is held, and until REPLY_COALESCE_MS after
 * the newest waiting message, requests pile up; then the newest gets the turn covering all of
 * them and the others are told which message's reply answers them. Different threads never
 * wait on each other: each has its own workflow. Ids and times only, never text.
 */

/** A thread with nothing to hand out ends after this long; the next message starts it again. */
const IDLE_MS = 60 * 60 * 1000;
/** Runs answered lately, kept so that a repeated request (a retried signal) is not answered twice. */
const ANSWERED_KEPT = 500;
/** How often a held turn's run is checked for being still open (a timer and a short activity). */
const HOLDER_CHECK_MS = 15 * 60 * 1000;
/** Well inside Temporal's limits (50 K events), and cheap to replay. */
const MAX_HISTORY_EVENTS = 5_000;

export async function threadWorkflow(input: ThreadInput): Promise<void> {
  const state: ThreadState = input.state ?? { waiting: [], holder: null, answered: [] };
  let arrivals = 0;
  const show = () => setCurrentDetails(threadDetails(state));

  setHandler(turnRequestSignal, (request) => {
    const known =
      state.answered.includes(request.runId) ||
      state.holder?.runId === request.runId ||
      state.waiting.some((w) => w.runId === request.runId);
    if (known) return;
    // One workflow id has one open run at a time: a request from a new run of a message whose
    // earlier run holds (or waits for) the turn proves that run has closed (an operator's rerun
    // after a terminate, a rerun after a failure). Its place goes to the new run.
    if (state.holder?.workflowId === request.workflowId) state.holder = null;
    state.waiting = state.waiting.filter((w) => w.workflowId !== request.workflowId);
    state.waiting.push(request);
    arrivals++;
    show();
  });
  setHandler(releaseTurnSignal, ({ runId }) => {
    if (state.holder?.runId !== runId) return;
    state.holder = null;
    show();
  });
  setHandler(threadStateQuery, () => state);
  show();

  for (;;) {
    if (state.holder !== null) {
      // A holder that closed without giving the turn back (terminated by an operator: a stopped run
      // stays stopped) would wedge the thread: now and then, ask whether it is still open.
      const holder = state.holder;
      if (!(await condition(() => state.holder !== holder, HOLDER_CHECK_MS)) && state.holder === holder) {
        if (!(await turnHolderOpen({ workflowId: holder.workflowId, runId: holder.runId }))) {
          log.warn('the run holding the turn closed without giving it back: the turn goes on', {
            workflowId: holder.workflowId,
          });
          if (state.holder === holder) state.holder = null;
          show();
        }
      }
      continue;
    }
    if (state.waiting.length === 0) {
      if (historyIsLong()) {
        await condition(allHandlersFinished);
        return continueAsNew<typeof threadWorkflow>({ ...input, state });
      }
      if (!(await condition(() => state.waiting.length > 0, IDLE_MS))) {
        await condition(allHandlersFinished);
        if (state.waiting.length === 0) return;
      }
      continue;
    }
    // The burst may still be going on: wait until the newest message is REPLY_COALESCE_MS old
    // (by its own timestamp, so a catch-up of old mail waits for nothing), or another arrives.
    const coalesceMs = Math.max(...state.waiting.map((w) => w.coalesceMs));
    const newest = Math.max(...state.waiting.map((w) => w.timestampMs));
    const waitMs = Math.min(newest + coalesceMs - Date.now(), coalesceMs);
    if (waitMs > 0) {
      const seen = arrivals;
      await condition(() => arrivals !== seen, waitMs);
      continue;
    }
    await handOut(state);
    show();
  }
}

/** The newest waiting message gets the turn and answers them all; the others are covered by it. */
async function handOut(state: ThreadState): Promise<void> {
  const batch = [...state.waiting].sort(
    (a, b) => a.timestampMs - b.timestampMs || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0),
  );
  state.waiting = [];
  const holder = batch[batch.length - 1]!;
  const covers = batch.map((r) => r.messageId);
  state.holder = { workflowId: holder.workflowId, runId: holder.runId, messageId: holder.messageId, covers };
  state.answered = [...state.answered, ...batch.map((r) => r.runId)].slice(-ANSWERED_KEPT);
  const [given] = await Promise.all([
    tell(holder, { kind: 'go', covers }),
    ...batch.slice(0, -1).map((r) => tell(r, { kind: 'covered', by: holder.messageId })),
  ]);
  if (!given && state.holder?.runId === holder.runId) state.holder = null;
}

/**
 * Tells a message workflow its turn (`go` or `covered`); false when the run is gone. Both keepers
 * use it (workflows/turn-keeper.ts too): the same command, so their recorded histories stay alike.
 */
export async function tell(request: { workflowId: string; runId: string }, grant: TurnGrant): Promise<boolean> {
  try {
    await getExternalWorkflowHandle(request.workflowId, request.runId).signal(turnSignal, grant);
    return true;
  } catch (error) {
    // The run is gone (terminated by an operator): nothing waits for this answer.
    log.warn('a message workflow that asked for its turn is gone', {
      workflowId: request.workflowId,
      error: String(error),
    });
    return false;
  }
}

/**
 * A thread's turn keeper outlives any one build (it idles an hour and continues as new), and the
 * message runs of every build ask it for turns: it follows the current build, like the schedules'
 * workflows. So a change to this file is guarded with patched() (docs/changing-the-workflow.md).
 */
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, threadWorkflow);

function historyIsLong(): boolean {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS;
}

/** The Web UI's "Current details": whose turn it is and who waits. Message ids only. */
export function threadDetails(state: ThreadState): string {
  const id = (messageId: string) => `\`${messageId.replace(/[`\r\n|]/g, ' ')}\``;
  const lines = ['**Turn**: ' + (state.holder ? id(state.holder.messageId) : 'nobody')];
  if (state.holder && state.holder.covers.length > 1)
    lines.push(`answering together: ${state.holder.covers.map(id).join(', ')}`);
  lines.push('', `**Waiting** (${state.waiting.length})${state.waiting.length > 0 ? ':' : ''}`);
  for (const w of [...state.waiting].sort((a, b) => a.timestampMs - b.timestampMs))
    lines.push(`- ${id(w.messageId)} (${new Date(w.timestampMs).toISOString()})`);
  return lines.join('\n');
}

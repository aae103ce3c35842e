import {
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  log,
  makeContinueAsNewFunc,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import {
  askTurnSignal,
  KEEPER_TASK_TIMEOUT_MS,
  LOCAL_RETRY_THRESHOLD_MS,
  releaseTurnSignal,
  threadTurnsQuery,
  type TurnKeeperInput,
  type TurnKeeperState,
  turnSignal,
} from '../contract';
import type { Activities } from '../activities';
import {
  adopt,
  ask,
  due,
  emptyState,
  gone,
  holdersToPoll,
  nextWakeAt,
  pollAll,
  polled,
  release,
  type Tell,
} from './turns/state';

/**
 * A turn keeper: handlers that change the state (workflows/turns/state.ts) and a loop that sends
 * what they decided. Asks and releases come by signal, turns go out by signal; while someone waits
 * behind a holder the loop asks Temporal now and then whether the holder's run is still open.
 */

/** With nothing kept for this long the keeper ends; the next ask starts it again. */
const IDLE_MS = 60 * 60 * 1000;
/**
 * A run continues as new past this many events, so a worker that takes a keeper over replays little
 * (about 1 ms an event; under the soak 500-event runs kept two cores busy replaying keepers).
 */
const KEEPER_RUN_EVENTS = 150;

const { heldTurns, holderEnds } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1 minute',
  localRetryThreshold: LOCAL_RETRY_THRESHOLD_MS,
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

export async function turnKeeperWorkflow(input: TurnKeeperInput): Promise<void> {
  const state: TurnKeeperState = input.state ?? emptyState();
  const outbox: Tell[] = [...(input.tells ?? [])];
  let changes = 0;
  setHandler(askTurnSignal, (request) => {
    outbox.push(...ask(state, request, Date.now()));
    changes++;
  });
  setHandler(releaseTurnSignal, ({ threadKey, runId, ...released }) => {
    outbox.push(...release(state, threadKey, runId, released));
    changes++;
  });
  setHandler(threadTurnsQuery, (threadKey) => state.threads[threadKey] ?? null);
  // Started afresh (never run, idle for an hour, or terminated by an operator): the runs that hold a
  // turn in this keeper's threads, from Temporal, before anything is granted. Continued runs carry them.
  if (input.state === undefined) adopt(state, await heldTurns({ index: input.index }), Date.now());

  let idleSince = Date.now();
  for (;;) {
    // Checked first, so a keeper that is never idle still moves on; answers not yet sent go with the state.
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > KEEPER_RUN_EVENTS) {
      await condition(allHandlersFinished);
      return makeContinueAsNewFunc<typeof turnKeeperWorkflow>({ workflowTaskTimeout: KEEPER_TASK_TIMEOUT_MS })({
        ...input,
        state,
        tells: outbox,
      });
    }
    const now = Date.now();
    outbox.push(...due(state, now));
    if (outbox.length > 0) {
      await Promise.all(outbox.splice(0).map(send(state)));
      continue;
    }
    const toPoll = holdersToPoll(state, now);
    if (toPoll.length > 0) {
      const ends = await holderEnds({ holders: toPoll });
      toPoll.forEach((h, i) => outbox.push(...polled(state, h.threadKey, h.runId, ends[i] ?? 'open', Date.now())));
      continue;
    }
    setCurrentDetails(turnKeeperDetails(state));
    const wakeAt = nextWakeAt(state);
    const seen = changes;
    const woken = await condition(() => changes !== seen, Math.max(1, (wakeAt ?? idleSince + IDLE_MS) - now));
    if (woken) idleSince = Date.now();
    if (woken || wakeAt !== undefined || Date.now() - idleSince < IDLE_MS) continue;
    // An idle hour: forget the holders that closed without a word; with nothing kept, end.
    if (Object.keys(state.threads).length > 0) {
      pollAll(state, Date.now());
      idleSince = Date.now();
      continue;
    }
    await condition(allHandlersFinished);
    if (changes === seen) return;
  }
}

/** Tells a run its answer; a `go` to a run that is gone lets the thread's turn go on. */
const send = (state: TurnKeeperState) => async (tell: Tell) => {
  try {
    await getExternalWorkflowHandle(tell.workflowId, tell.runId).signal(turnSignal, tell.grant);
  } catch (error) {
    log.warn('a message run that asked for its turn is gone', { workflowId: tell.workflowId, error: String(error) });
    if (tell.grant.kind === 'go') gone(state, tell.threadKey, tell.runId);
  }
};

/** The keeper outlives any build and every build's runs ask it: it follows the current build. */
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, turnKeeperWorkflow);

/** Threads listed in the Web UI's Current details, at most. */
const DETAILS_THREADS = 30;

/** The Web UI's "Current details": for each thread kept, whose turn it is and who waits. Ids only. */
export function turnKeeperDetails(state: TurnKeeperState): string {
  const id = (text: string) => `\`${text.replace(/[`\r\n|]/g, ' ')}\``;
  const threads = Object.values(state.threads);
  const lines = [`**Threads**: ${threads.length} kept`, '', '| thread | turn | waiting |', '|---|---|---|'];
  for (const t of threads.slice(0, DETAILS_THREADS)) {
    const turn = t.holder
      ? id(t.holder.messageId) + (t.holder.covers.length > 1 ? ` (answering ${t.holder.covers.length})` : '')
      : 'nobody';
    const waiting = [...t.waiting].sort((a, b) => a.timestampMs - b.timestampMs).map((w) => id(w.messageId));
    lines.push(`| ${id(t.inboxId)} ${id(t.threadId)} | ${turn} | ${waiting.join(', ')} |`);
  }
  if (threads.length > DETAILS_THREADS)
    lines.push('', `…and ${threads.length - DETAILS_THREADS} more (query \`threadTurns\` with a thread's key)`);
  return lines.join('\n');
}

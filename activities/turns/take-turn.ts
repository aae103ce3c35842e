import { Context } from '@temporalio/activity';
import type { AgentMail } from 'agentmail';
import { WithStartWorkflowOperation, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import {
  KEEPER_TASK_TIMEOUT_MS,
  NEWER_LISTED,
  queueTurnSignal,
  TURN_UPDATE_WAIT_MS,
  type TakeTurnAnswer,
  takeTurnUpdate,
  threadTurnDoneSignal,
  TURN_KEEPER_WORKFLOW,
  turnKeeperTaskQueue,
  type ThreadTurnRequest,
  type TurnKeeperInput,
  type TurnHandBack,
  type TurnKeeperRef,
} from '../../contract';
import { fetchMessage, recentThread } from '../agentmail/reads';
import { failpoint } from '../../lib/failpoints';
import { inboundWorkflowId, threadTurnKeeper, threadWorkflowId } from '../../lib/hashing';
import { releaseTurn, requestTurn, type TurnDeps, type TurnInput } from './request-turn';

/**
 * How old a read of the thread the turn takes: the decision's, read in the same workflow task (a
 * local activity just before), is milliseconds old unless the worker is far behind.
 */
const THREAD_READ_MAX_AGE_MS = 2_000;

export interface TakeTurnResult extends TurnKeeperRef {
  answer: TakeTurnAnswer;
}

/**
 * Asks the thread's shared turn keeper for this message's turn (workflows/turn-keeper.ts) by
 * update-with-start: the first request to a keeper starts it, every later one finds it. A free
 * thread's turn is the Update's result; otherwise the answer is `queued` and a `turn` signal
 * follows. A message still inside its burst window (REPLY_COALESCE_MS) is always queued, so it
 * asks by signal-with-start and does not wait for an answer. The Update's id is the run's, so a
 * retried request (this activity retried after a lost response) attaches to the first one, and the
 * keeper answers a known run alike after that.
 *
 * The hand-over from builds that kept a workflow per thread: while such a keeper of this thread
 * still runs (a message of an older build holds or waits for the turn, or it idles out its hour),
 * this message asks it instead, as those builds did, so a thread is never answered by two keepers
 * at once. Once no older build's run is open, the per-thread keepers end within the hour, and this
 * look finds none.
 *
 * A thread's only message, past its burst window (most threads, with REPLY_COALESCE_MS=0 or in a
 * catch-up of older mail), does not ask at all: nobody can hold the thread's turn or wait for it,
 * and no burst is to be answered with it, so the turn is its own. The keeper never hears of it; a
 * later message of the thread names that first message's run while it is open (`loneHolder`), and
 * the keeper takes it as the holder it did not know of, tells it that someone waits, and looks now
 * and then whether it closed, as for any holder.
 */
export async function takeTurn(deps: TurnDeps, input: TurnInput): Promise<TakeTurnResult> {
  const client = Context.current().client;
  // Usually the decision's read of the thread, moments ago in this workflow task (agentmail/reads.ts).
  // Whether the message is alone is judged as of that read (`readAt`), not of now: a message that
  // came after the read came after this one's window too, so it names this run as the thread's lone
  // holder (mayHaveTakenItsTurnAlone). Judged against now, one that came in between, inside the
  // window, would neither be seen here nor name this run.
  const { thread, readAt } = await recentThread(deps.agentmail, input, THREAD_READ_MAX_AGE_MS);
  // Only a thread with other messages can have a keeper of its own from an older build: a thread's
  // first message (most threads are one message long) needs no look.
  const older = threadWorkflowId(input.inboxId, input.threadId);
  if (thread.messages.some((m) => m.messageId !== input.messageId) && (await isRunning(older))) {
    await requestTurn(deps, input);
    return { keeperWorkflowId: older, threadKey: null, answer: { kind: 'queued' } };
  }
  const { workflowId, threadKey, index } = threadTurnKeeper(
    input.inboxId,
    input.threadId,
    Context.current().info.taskQueue,
  );
  // The thread as AgentMail has it: this message's timestamp orders the thread, and the messages that
  // came after it (and after our last reply) will ask too, so the keeper waits for them.
  const message =
    thread.messages.find((m) => m.messageId === input.messageId) ?? (await fetchMessage(deps.agentmail, input));
  const keeper = { keeperWorkflowId: workflowId, threadKey };
  const alone = thread.messages.length === 1 && thread.messages[0]!.messageId === input.messageId;
  if (alone && message.timestamp.getTime() + deps.config.REPLY_COALESCE_MS <= readAt) {
    return { ...keeper, answer: { kind: 'go', covers: [input.messageId] } };
  }
  const newer = newerUnanswered(thread.messages, message);
  const first = mayHaveTakenItsTurnAlone(thread.messages, deps.config.REPLY_COALESCE_MS);
  const loneHolder = first !== null && first !== input.messageId ? await openRun(input.inboxId, first) : null;
  const request: ThreadTurnRequest = {
    threadKey,
    inboxId: input.inboxId,
    threadId: input.threadId,
    workflowId: input.workflowId,
    runId: input.runId,
    messageId: input.messageId,
    timestampMs: message.timestamp.getTime(),
    coalesceMs: deps.config.REPLY_COALESCE_MS,
    ...(newer.length > 0 ? { newer } : {}),
    ...(loneHolder !== null ? { loneHolder } : {}),
  };
  const args: [TurnKeeperInput] = [{ index }];
  const taskQueue = turnKeeperTaskQueue(Context.current().info.taskQueue);
  // Queued without waiting for an answer: the turn comes by signal.
  const queue = async (req: ThreadTurnRequest): Promise<TakeTurnResult> => {
    await client.workflow.signalWithStart(TURN_KEEPER_WORKFLOW, {
      workflowId,
      taskQueue,
      args,
      workflowTaskTimeout: KEEPER_TASK_TIMEOUT_MS,
      signal: queueTurnSignal,
      signalArgs: [req],
    });
    failpoint('turn.after-request');
    return { ...keeper, answer: { kind: 'queued' } };
  };
  // Inside its burst window the answer can only be "wait": sent by signal-with-start, so this
  // activity (and the workflow task it holds) does not wait for the keeper; the turn comes by signal.
  if (request.timestampMs + request.coalesceMs > Date.now()) return queue(request);
  // The answer, or null when the keeper has not answered within TURN_UPDATE_WAIT_MS. Until the keeper
  // answers, this activity holds its workflow's task and a slot of its worker; a keeper whose worker
  // died is seconds away from answering, so past the wait the request goes by signal instead, and the
  // keeper tells by signal whatever it answered (or answers later).
  const ask = async (req: ThreadTurnRequest, updateId: string): Promise<TakeTurnAnswer | null> => {
    try {
      return await client.withDeadline(Date.now() + TURN_UPDATE_WAIT_MS, () =>
        client.workflow.executeUpdateWithStart(takeTurnUpdate, {
          args: [req],
          updateId,
          startWorkflowOperation: new WithStartWorkflowOperation(TURN_KEEPER_WORKFLOW, {
            workflowId,
            taskQueue,
            args,
            workflowTaskTimeout: KEEPER_TASK_TIMEOUT_MS,
            workflowIdConflictPolicy: 'USE_EXISTING',
          }),
        }),
      );
    } catch (error) {
      // The keeper refused the request itself (its validator): a malformed request is a bug, not a wait.
      if (error instanceof WorkflowUpdateFailedError) throw error;
      // No answer in time, or none to be had now: Temporal refuses Updates while a workflow's task
      // keeps failing (a keeper whose worker was killed), and past ten in flight.
      Context.current().log.info('the turn keeper did not answer in time: asking by signal', {
        keeperWorkflowId: workflowId,
        error: error instanceof Error ? error.message : String(error),
      });
      return null;
    }
  };
  let answer = await ask(request, `turn-${input.runId}`);
  // Queued behind a holder the keeper has not heard from (it is told only when someone waits): the
  // reply to a thread's last message has usually gone long since. If Temporal says that run has
  // closed, ask again saying so, and the turn is this message's at once.
  if (answer?.kind === 'queued' && answer.behind !== undefined) {
    const [closed] = await closedRuns({ runs: [answer.behind] });
    if (closed === true) {
      const closedHolderRunId = answer.behind.runId;
      answer = await ask({ ...request, closedHolderRunId }, `turn-${input.runId}-after-${closedHolderRunId}`);
    }
  }
  if (answer === null) return queue(request);
  failpoint('turn.after-request');
  return { ...keeper, answer };
}

type ThreadMessage = Pick<AgentMail.Message, 'messageId' | 'timestamp' | 'labels'>;

const at = (m: ThreadMessage) => m.timestamp.getTime();
/** Whether `a` comes after `b` in the thread's order (the keeper's): by timestamp, then id. */
const after = (a: ThreadMessage, b: ThreadMessage) => at(a) > at(b) || (at(a) === at(b) && a.messageId > b.messageId);
const byThreadOrder = (a: ThreadMessage, b: ThreadMessage) => at(a) - at(b) || (a.messageId < b.messageId ? -1 : 1);
/** When we last replied in the thread (our replies carry the `sent` label); -Infinity before any. */
const lastReplyAt = (messages: readonly ThreadMessage[]) =>
  Math.max(-Infinity, ...messages.filter((m) => m.labels.includes('sent')).map(at));

/**
 * The inbound messages of a thread that came after `message` and after our last reply in it, oldest
 * first, at most NEWER_LISTED (the newest): the rest of a burst whose own turn requests may not have
 * reached the keeper yet (the workers are behind). Ordered as the keeper orders a thread: by
 * timestamp, then id.
 */
export function newerUnanswered(messages: readonly ThreadMessage[], message: ThreadMessage): string[] {
  const lastReply = lastReplyAt(messages);
  return messages
    .filter((m) => !m.labels.includes('sent') && after(m, message) && at(m) > lastReply)
    .sort(byThreadOrder)
    .map((m) => m.messageId)
    .slice(-NEWER_LISTED);
}

/**
 * The thread's first message, when it may have taken its turn as the thread's only message (see
 * takeTurn): it is inbound, nothing has been sent in the thread, and the message after it came once
 * its burst window had passed (it was alone when it looked only if it looked before the next one
 * came). Null otherwise: a message that was never alone asked the keeper, which knows its run.
 */
export function mayHaveTakenItsTurnAlone(messages: readonly ThreadMessage[], coalesceMs: number): string | null {
  if (messages.some((m) => m.labels.includes('sent'))) return null;
  const [first, next] = [...messages].sort(byThreadOrder);
  if (first === undefined || next === undefined) return null;
  return at(first) + coalesceMs <= at(next) ? first.messageId : null;
}

/** The open run of this message's workflow, or null when it has none. */
async function openRun(
  inboxId: string,
  messageId: string,
): Promise<NonNullable<ThreadTurnRequest['loneHolder']> | null> {
  const workflowId = inboundWorkflowId({ inboxId, messageId });
  const runId = await openRunId(workflowId);
  return runId === null ? null : { workflowId, runId, messageId };
}

/**
 * Gives a shared keeper's turn back, but only when the keeper said someone waits (`turnWanted`):
 * a lone thread's keeper learns that the holder closed when it next matters
 * (workflows/turn-keeper.ts). The per-thread keeper of an older build is always told, as it expects.
 */
export async function giveTurnBack(input: TurnHandBack): Promise<void> {
  if (input.keeperWorkflowId === '') return; // no turn held
  if (input.threadKey === null) return releaseTurn({ threadWorkflowId: input.keeperWorkflowId, runId: input.runId });
  if (!input.someoneWaits) return;
  try {
    await Context.current()
      .client.workflow.getHandle(input.keeperWorkflowId)
      .signal(threadTurnDoneSignal, { threadKey: input.threadKey, runId: input.runId });
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return; // a keeper that ended holds no turn
    throw error;
  }
}

/** Of these runs, which have closed (true) and which are still open (false), in order. */
export async function closedRuns(input: { runs: { workflowId: string; runId: string }[] }): Promise<boolean[]> {
  const results: boolean[] = [];
  // A sweep may ask about a few hundred runs: a handful at a time, so the server is not flooded.
  const AT_ONCE = 16;
  for (let i = 0; i < input.runs.length; i += AT_ONCE) {
    const slice = input.runs.slice(i, i + AT_ONCE);
    results.push(
      ...(await Promise.all(slice.map(async ({ workflowId, runId }) => (await openRunId(workflowId, runId)) === null))),
    );
  }
  return results;
}

async function isRunning(workflowId: string): Promise<boolean> {
  return (await openRunId(workflowId)) !== null;
}

/** The run's id while it is open (Temporal's describe; the latest run without `runId`), else null. */
async function openRunId(workflowId: string, runId?: string): Promise<string | null> {
  try {
    const described = await Context.current().client.workflow.getHandle(workflowId, runId).describe();
    return described.status.name === 'RUNNING' ? described.runId : null;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
}

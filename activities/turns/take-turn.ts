import { Context } from '@temporalio/activity';
import { WithStartWorkflowOperation, WorkflowNotFoundError } from '@temporalio/client';
import {
  queueTurnSignal,
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
import { fetchMessage } from '../agentmail/reads';
import { failpoint } from '../../lib/failpoints';
import { threadTurnKeeper, threadWorkflowId } from '../../lib/hashing';
import { releaseTurn, requestTurn, type TurnDeps, type TurnInput } from './request-turn';

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
 */
export async function takeTurn(deps: TurnDeps, input: TurnInput): Promise<TakeTurnResult> {
  const client = Context.current().client;
  const older = threadWorkflowId(input.inboxId, input.threadId);
  // Both at once: this activity holds its workflow's task (and a worker slot) until it returns.
  const [olderRuns, message] = await Promise.all([isRunning(older), fetchMessage(deps.agentmail, input)]);
  if (olderRuns) {
    await requestTurn(deps, input);
    return { keeperWorkflowId: older, threadKey: null, answer: { kind: 'queued' } };
  }
  const { workflowId, threadKey, index } = threadTurnKeeper(
    input.inboxId,
    input.threadId,
    Context.current().info.taskQueue,
  );
  const request: ThreadTurnRequest = {
    threadKey,
    inboxId: input.inboxId,
    threadId: input.threadId,
    workflowId: input.workflowId,
    runId: input.runId,
    messageId: input.messageId,
    timestampMs: message.timestamp.getTime(),
    coalesceMs: deps.config.REPLY_COALESCE_MS,
  };
  const args: [TurnKeeperInput] = [{ index }];
  const taskQueue = turnKeeperTaskQueue(Context.current().info.taskQueue);
  // Inside its burst window the answer can only be "wait": sent by signal-with-start, so this
  // activity (and the workflow task it holds) does not wait for the keeper; the turn comes by signal.
  if (request.timestampMs + request.coalesceMs > Date.now()) {
    await client.workflow.signalWithStart(TURN_KEEPER_WORKFLOW, {
      workflowId,
      taskQueue,
      args,
      signal: queueTurnSignal,
      signalArgs: [request],
    });
    failpoint('turn.after-request');
    return { keeperWorkflowId: workflowId, threadKey, answer: { kind: 'queued' } };
  }
  const ask = (req: ThreadTurnRequest, updateId: string) =>
    client.workflow.executeUpdateWithStart(takeTurnUpdate, {
      args: [req],
      updateId,
      startWorkflowOperation: new WithStartWorkflowOperation(TURN_KEEPER_WORKFLOW, {
        workflowId,
        taskQueue,
        args,
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
  let answer = await ask(request, `turn-${input.runId}`);
  // Queued behind a holder the keeper has not heard from (it is told only when someone waits): the
  // reply to a thread's last message has usually gone long since. If Temporal says that run has
  // closed, ask again saying so, and the turn is this message's at once.
  if (answer.kind === 'queued' && answer.behind !== undefined) {
    const [closed] = await closedRuns({ runs: [answer.behind] });
    if (closed === true)
      answer = await ask(
        { ...request, closedHolderRunId: answer.behind.runId },
        `turn-${input.runId}-after-${answer.behind.runId}`,
      );
  }
  failpoint('turn.after-request');
  return { keeperWorkflowId: workflowId, threadKey, answer };
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
  const client = Context.current().client;
  const results: boolean[] = [];
  // A sweep may ask about a few hundred runs: a handful at a time, so the server is not flooded.
  const AT_ONCE = 16;
  for (let i = 0; i < input.runs.length; i += AT_ONCE) {
    const slice = input.runs.slice(i, i + AT_ONCE);
    results.push(
      ...(await Promise.all(
        slice.map(async ({ workflowId, runId }) => {
          try {
            return (await client.workflow.getHandle(workflowId, runId).describe()).status.name !== 'RUNNING';
          } catch (error) {
            if (error instanceof WorkflowNotFoundError) return true;
            throw error;
          }
        }),
      )),
    );
  }
  return results;
}

async function isRunning(workflowId: string): Promise<boolean> {
  try {
    return (await Context.current().client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

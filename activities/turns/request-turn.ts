import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { AgentMailClient } from 'agentmail';
import {
  type MessageRef,
  releaseTurnSignal,
  SearchAttributes,
  THREAD_WORKFLOW,
  type ThreadInput,
  type TurnRequest,
  turnRequestSignal,
} from '../../contract';
import { fetchMessage } from '../agentmail/reads';
import { failpoint } from '../../lib/failpoints';
import { threadWorkflowId } from '../../lib/hashing';
import type { ActivityConfig } from '../../lib/config';

export interface TurnInput extends MessageRef {
  threadId: string;
  /** The asking message workflow's id and run (the thread answers this run by signal). */
  workflowId: string;
  runId: string;
}

export interface TurnDeps {
  agentmail: AgentMailClient;
  config: Pick<ActivityConfig, 'REPLY_COALESCE_MS'>;
}

/**
 * Asks the thread's turn keeper for this message's turn: signal-with-start on the thread's
 * workflow id (inbox + thread, hashed), so the first message of a thread starts it and every
 * later one finds it. A repeated request (this activity retried) is answered once: the thread
 * workflow knows the run. The message's timestamp orders the thread; it is read here, not
 * carried through history from the decision.
 */
export async function requestTurn(deps: TurnDeps, input: TurnInput): Promise<{ threadWorkflowId: string }> {
  const message = await fetchMessage(deps.agentmail, input);
  const workflowId = threadWorkflowId(input.inboxId, input.threadId);
  const request: TurnRequest = {
    workflowId: input.workflowId,
    runId: input.runId,
    messageId: input.messageId,
    timestampMs: message.timestamp.getTime(),
    coalesceMs: deps.config.REPLY_COALESCE_MS,
  };
  const args: [ThreadInput] = [{ inboxId: input.inboxId, threadId: input.threadId }];
  await Context.current().client.workflow.signalWithStart(THREAD_WORKFLOW, {
    workflowId,
    taskQueue: Context.current().info.taskQueue,
    args,
    signal: turnRequestSignal,
    signalArgs: [request],
    typedSearchAttributes: [
      { key: SearchAttributes.InboxId, value: input.inboxId },
      { key: SearchAttributes.ThreadId, value: input.threadId },
    ],
  });
  failpoint('turn.after-request');
  return { threadWorkflowId: workflowId };
}

/**
 * Gives the thread's turn back (the reply is sent): the thread's next turn may go. Repeating it is
 * harmless (the thread releases a run's turn once); a thread workflow that is gone holds no turn.
 */
export async function releaseTurn(input: { threadWorkflowId: string; runId: string }): Promise<void> {
  if (input.threadWorkflowId === '') return; // no turn held
  try {
    await Context.current()
      .client.workflow.getHandle(input.threadWorkflowId)
      .signal(releaseTurnSignal, { runId: input.runId });
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return;
    throw error;
  }
}

/**
 * Whether the run that holds a thread's turn is still open. The thread's turn keeper asks now and
 * then while a turn is held: a run an operator terminated (or that timed out) never gives its
 * turn back, and a stopped run stays stopped, so without this the thread would wait forever.
 */
export async function turnHolderOpen(input: { workflowId: string; runId: string }): Promise<boolean> {
  try {
    const described = await Context.current().client.workflow.getHandle(input.workflowId, input.runId).describe();
    return described.status.name === 'RUNNING';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

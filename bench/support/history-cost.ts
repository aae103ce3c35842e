import type { Client } from '@temporalio/client';
import { TURN_KEEPERS } from '../../contract';
import { inboundWorkflowId, turnKeeperWorkflowId } from '../../lib/hashing';

/**
 * Temporal's cost of a run, in history events: what the server writes, and replays on a cache
 * miss. The turn keepers (workflows/turn-keeper.ts) are shared by many threads, so their cost is
 * counted whole — every run of every keeper on the task queue, continued-as-new runs included —
 * and shared out over the messages.
 */
export async function historyLength(client: Client, workflowId: string, runId?: string): Promise<number> {
  return ((await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []).length;
}

/** Mean history length of these messages' workflows (a sample is enough: runs of one path are alike). */
export async function meanMessageHistory(
  client: Client,
  messages: Array<{ inboxId: string; messageId: string }>,
): Promise<number> {
  if (messages.length === 0) return 0;
  const lengths = await Promise.all(messages.map((m) => historyLength(client, inboundWorkflowId(m))));
  return lengths.reduce((a, b) => a + b, 0) / lengths.length;
}

/** Every event of every run of the task queue's turn keepers. */
export async function turnKeeperEvents(client: Client, taskQueue: string): Promise<number> {
  let total = 0;
  for (let index = 0; index < TURN_KEEPERS; index++) {
    const workflowId = turnKeeperWorkflowId(taskQueue, index);
    for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
      total += await historyLength(client, workflowId, run.runId);
  }
  return total;
}

import type { Client } from '@temporalio/client';
import { inboundWorkflowId } from '../../lib/hashing';

/** Temporal's cost of a run, in history events: what the server writes, and replays on a cache miss. */
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

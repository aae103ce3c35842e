import { Client, type Connection, WorkflowNotFoundError } from '@temporalio/client';
import { connectTemporalClient } from '../../lib/temporal-connection';
import { testEnv } from './env';

export async function connectClient(): Promise<{ client: Client; connection: Connection }> {
  const connection = await connectTemporalClient(testEnv.temporal);
  return { client: new Client({ connection, namespace: testEnv.namespace }), connection };
}

/** True when Temporal has any execution under this workflow id. */
export async function workflowExists(client: Client, workflowId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** Polls until `check` returns a value other than undefined, or fails with what it last saw. */
export async function eventually<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

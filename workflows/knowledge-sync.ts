import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

/** Run by a Temporal Schedule (worker/schedules.ts, KNOWLEDGE_SYNC_INTERVAL): re-syncs the knowledge base. */
const { syncKnowledge } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 5 },
});

export async function knowledgeSyncWorkflow(): Promise<{ added: number; changed: number; retired: number }> {
  const { collections } = await syncKnowledge();
  return collections.reduce(
    (sum, c) => ({ added: sum.added + c.added, changed: sum.changed + c.changed, retired: sum.retired + c.retired }),
    { added: 0, changed: 0, retired: 0 },
  );
}

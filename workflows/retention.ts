import { proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { PruneResult } from '../activities/upkeep/retention';

/**
 * Run by a Temporal Schedule (worker/schedules.ts): deletes inbound_events older than 7 days,
 * reply-budget reservations older than 48 h and operations older than OPERATION_RETENTION_DAYS, in batches.
 */
const { pruneExpiredRecords } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

// A short run started by a schedule: it moves to the current build at its next task (Worker Versioning).
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, retentionWorkflow);
export async function retentionWorkflow(input: { batchSize?: number } = {}): Promise<PruneResult> {
  return pruneExpiredRecords(input);
}

import {
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import type { Workflow } from '@temporalio/common';

/**
 * The Temporal Schedules replyonce runs on: the webhook watchdog and retention. A worker creates
 * them when it starts, or brings an existing one's timing and action up to date (a pause an
 * operator set is kept). Idempotent, so any number of worker replicas may do it at once.
 */

/**
 * AgentMail disables a webhook after 5 days of failures; every minute it stays off is mail that
 * waits for the catch-up. Five minutes is prompt, and a check is a single list call.
 */
export const WATCHDOG_INTERVAL = '5 minutes';
/** Hourly keeps each run's batches few; rows expire in days, so nothing waits long. */
export const RETENTION_INTERVAL = '1 hour';

/** Per task queue, so two deployments sharing a namespace keep their own. */
export const scheduleIds = (taskQueue: string) => ({
  watchdog: `${taskQueue}-webhook-watchdog`,
  retention: `${taskQueue}-retention`,
});

type StartOptions = ScheduleOptions<ScheduleOptionsStartWorkflowAction<Workflow>>;

export function replyonceSchedules(taskQueue: string): StartOptions[] {
  const ids = scheduleIds(taskQueue);
  // SKIP: a run still going (a long catch-up) is not joined by a second one.
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '10 minutes' };
  return [
    {
      scheduleId: ids.watchdog,
      spec: { intervals: [{ every: WATCHDOG_INTERVAL }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'webhookWatchdogWorkflow',
        workflowId: ids.watchdog,
        taskQueue,
        args: [],
      },
      policies,
    },
    {
      scheduleId: ids.retention,
      spec: { intervals: [{ every: RETENTION_INTERVAL }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'retentionWorkflow',
        workflowId: ids.retention,
        taskQueue,
        args: [],
      },
      policies,
    },
  ];
}

export async function ensureSchedules(
  client: Client,
  taskQueue: string,
): Promise<{ created: string[]; updated: string[] }> {
  const created: string[] = [];
  const updated: string[] = [];
  for (const options of replyonceSchedules(taskQueue)) {
    try {
      await client.schedule.create(options);
      created.push(options.scheduleId);
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      await client.schedule.getHandle(options.scheduleId).update((previous) => ({
        ...previous,
        spec: options.spec,
        action: options.action,
        policies: { ...previous.policies, ...options.policies },
      }));
      updated.push(options.scheduleId);
    }
  }
  return { created, updated };
}

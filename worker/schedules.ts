import {
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import type { Workflow } from '@temporalio/common';

/**
 * The Temporal Schedules replyonce runs on: the webhook watchdog, retention, and the knowledge
 * re-sync (when KNOWLEDGE_DIR or KNOWLEDGE_URLS is set and KNOWLEDGE_SYNC_INTERVAL is not `off`). A worker creates
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
  knowledge: `${taskQueue}-knowledge-sync`,
});

export interface ScheduleSettings {
  /** How often the knowledge base is re-synced; null: no knowledge schedule (removed if one exists). */
  knowledgeSyncMs?: number | null;
}

type StartOptions = ScheduleOptions<ScheduleOptionsStartWorkflowAction<Workflow>>;

export function replyonceSchedules(taskQueue: string, settings: ScheduleSettings = {}): StartOptions[] {
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
    ...(settings.knowledgeSyncMs
      ? [
          {
            scheduleId: ids.knowledge,
            spec: { intervals: [{ every: settings.knowledgeSyncMs }] },
            action: {
              type: 'startWorkflow' as const,
              workflowType: 'knowledgeSyncWorkflow',
              workflowId: ids.knowledge,
              taskQueue,
              args: [],
            },
            policies,
          },
        ]
      : []),
  ];
}

export async function ensureSchedules(
  client: Client,
  taskQueue: string,
  settings: ScheduleSettings = {},
): Promise<{ created: string[]; updated: string[] }> {
  const created: string[] = [];
  const updated: string[] = [];
  const wanted = replyonceSchedules(taskQueue, settings);
  // A knowledge schedule no longer wanted (the sources were unset, or the interval set to off) goes.
  if (settings.knowledgeSyncMs !== undefined && !wanted.some((o) => o.scheduleId === scheduleIds(taskQueue).knowledge))
    await client.schedule
      .getHandle(scheduleIds(taskQueue).knowledge)
      .delete()
      .catch(() => undefined);
  for (const options of wanted) {
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

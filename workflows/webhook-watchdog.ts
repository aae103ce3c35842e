import { proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { DisabledWebhook, InboxCatchUp } from '../activities/upkeep/webhook-watchdog';

/**
 * Run by a Temporal Schedule (worker/schedules.ts): checks AgentMail's webhooks; when one reads
 * disabled it alerts, and — with WATCHDOG_REENABLE — re-enables it and then catches each covered
 * inbox up from its cursor, so the mail that arrived while it was off is answered too.
 */

/** A quick read, five attempts; the next scheduled run is the further retry. */
const { checkWebhooks } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

/**
 * Once a re-enable may have happened, the run must reach its catch-up: a later run would find the
 * webhook on and see nothing to do. So these retry until done (the schedule skips its next runs
 * meanwhile); a refusal from AgentMail is an answer (false), not an error, and is not retried.
 */
const { reenableWebhook } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * The catch-up heartbeats every page and message. No attempt limit, for the reason above: the
 * webhook is back on, so only this run can still hand over what arrived while it was off. What no
 * retry can fix ends it anyway (an inbox AgentMail no longer has is "not run"; an AgentMail 4xx or a
 * Postgres constraint error is a final failure, activities/failures/boundary.ts).
 */
const { catchUpInbox } = proxyActivities<Activities>({
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

export interface WebhookWatchdogResult {
  watched: string[];
  disabled: string[];
  reenabled: string[];
  catchUpInboxes: string[];
  catchUps: InboxCatchUp[];
}

/**
 * Three steps, each in history before the next: what was found disabled, what was turned back on,
 * and the catch-ups. So a worker crash after the re-enable cannot lose the catch-up (the next run
 * would find the webhook enabled and see nothing to do).
 */
// A short run started by a schedule: it moves to the current build at its next task (Worker Versioning).
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookWatchdogWorkflow);
export async function webhookWatchdogWorkflow(): Promise<WebhookWatchdogResult> {
  const check = await checkWebhooks();
  const reenabled: DisabledWebhook[] = [];
  if (check.reenable) {
    for (const webhook of check.disabled)
      if (await reenableWebhook({ webhookId: webhook.webhookId })) reenabled.push(webhook);
  }
  const catchUpInboxes = [...new Set(reenabled.flatMap((w) => w.inboxes))].sort();
  const catchUps: InboxCatchUp[] = [];
  for (const inboxId of catchUpInboxes) catchUps.push(await catchUpInbox({ inboxId }));
  return {
    watched: check.watched,
    disabled: check.disabled.map((w) => w.webhookId),
    reenabled: reenabled.map((w) => w.webhookId),
    catchUpInboxes,
    catchUps,
  };
}

import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { AgentMail, AgentMailClient } from 'agentmail';
import type { CatchUpSummary } from '../../intake/catch-up';
import { InboxCursors } from '../../intake/inbox-cursors';
import { classifyCatchUpError, createCatchUp } from '../../intake/intake';
import type { Db } from '../../lib/db';
import { webhookEndpointDisabled, webhookEndpointDisabledNotOurs } from '../../lib/metrics';
import type { ActivityConfig } from '../../lib/config';

/**
 * The webhook watchdog's effects. AgentMail disables a webhook after 5 days of failed deliveries,
 * silently, and never redelivers what it missed: the watchdog notices (alert + metric) and, when
 * configured to, turns it back on and catches up from each inbox's cursor.
 *
 * It touches only what is ours (issue 18 point 5): the webhooks named in WATCHDOG_WEBHOOK_IDS, else
 * those whose URL is PUBLIC_WEBHOOK_URL. The organisation's other webhooks (a colleague's, one
 * disabled on purpose) are read, and a disabled one is reported in the log and a metric, never changed.
 */

export interface WatchdogDeps {
  db: Db;
  agentmail: AgentMailClient;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<
    ActivityConfig,
    'OPERATION_RETENTION_DAYS' | 'PUBLIC_WEBHOOK_URL' | 'WATCHDOG_REENABLE' | 'WATCHDOG_WEBHOOK_IDS'
  >;
}

export interface DisabledWebhook {
  webhookId: string;
  /** The inboxes it covers (every inbox with a cursor when it covers them all): what a catch-up replays. */
  inboxes: string[];
}

export interface WebhookCheck {
  /** Webhooks watched: ours (WATCHDOG_WEBHOOK_IDS, else PUBLIC_WEBHOOK_URL) that receive message.received. */
  watched: string[];
  /** Disabled webhooks of the organisation that are not ours: reported, never re-enabled. */
  notOurs: string[];
  disabled: DisabledWebhook[];
  /** WATCHDOG_REENABLE, so the workflow knows whether to turn them back on. */
  reenable: boolean;
}

export type InboxCatchUp = CatchUpSummary | { inboxId: string; notRun: string };

const MESSAGE_RECEIVED = 'message.received';

/** Reads only (and alerts): the re-enable is an activity of its own, after this result is in history. */
export async function checkWebhooks(deps: WatchdogDeps): Promise<WebhookCheck> {
  const all = await listWebhooks(deps.agentmail);
  const ours = ownedBy(deps.config);
  // Named by id: watched whatever its events; found by URL: only if it carries message.received.
  const watched = all.filter((w) => ours(w) && (deps.config.WATCHDOG_WEBHOOK_IDS.length > 0 || receivesMessages(w)));
  for (const id of deps.config.WATCHDOG_WEBHOOK_IDS.filter((id) => !all.some((w) => w.webhookId === id))) {
    log.warn('a watched webhook does not exist at AgentMail (WATCHDOG_WEBHOOK_IDS)', { webhookId: id });
  }
  if (watched.length === 0) {
    log.warn(
      "the watchdog watches no webhook: none of the organisation's message.received webhooks is this deployment's",
      {
        alert: 'webhook_not_found',
        remedy: deps.config.PUBLIC_WEBHOOK_URL
          ? 'check PUBLIC_WEBHOOK_URL against the URL of the webhook at AgentMail, or set WATCHDOG_WEBHOOK_IDS'
          : "set PUBLIC_WEBHOOK_URL to this deployment's webhook URL (or WATCHDOG_WEBHOOK_IDS)",
      },
    );
  }
  // Not ours: a disabled one is worth knowing about (mail may go unseen), but it is not ours to change.
  const notOurs = all.filter((w) => !w.enabled && !ours(w) && receivesMessages(w));
  webhookEndpointDisabledNotOurs.set(notOurs.length);
  for (const webhook of notOurs) {
    log.warn("an AgentMail webhook that is not this deployment's is disabled: reported, not changed", {
      alert: 'other_webhook_disabled',
      webhookId: webhook.webhookId,
    });
  }
  const disabled = watched.filter((w) => !w.enabled);
  // What this run found, re-enabled or not: it stays up until the next run, long enough to be scraped.
  webhookEndpointDisabled.set(disabled.length);
  for (const webhook of disabled) {
    log.error(
      'ALERT: AgentMail webhook is disabled: no message.received is being delivered, and AgentMail will not redeliver what it missed',
      {
        alert: 'webhook_disabled',
        webhookId: webhook.webhookId,
        reenable: deps.config.WATCHDOG_REENABLE,
        remedy: deps.config.WATCHDOG_REENABLE
          ? 're-enabling it and catching up'
          : 're-enable it at AgentMail, then run `npm run replay -- --all` (or set WATCHDOG_REENABLE=true)',
      },
    );
  }
  const withCursor = disabled.some((w) => !w.inboxIds?.length)
    ? (await new InboxCursors(deps.db).list()).map((c) => c.inboxId)
    : [];
  return {
    watched: watched.map((w) => w.webhookId),
    notOurs: notOurs.map((w) => w.webhookId),
    disabled: disabled.map((w) => ({
      webhookId: w.webhookId,
      inboxes: w.inboxIds?.length ? [...w.inboxIds] : withCursor,
    })),
    reenable: deps.config.WATCHDOG_REENABLE,
  };
}

/**
 * Catches one inbox up from its cursor through the intake, like a webhook: intake rows on this
 * worker's task queue, which the API replicas' relays start. Postgres or AgentMail failing fails
 * the attempt and Temporal retries it; what a page already handed over is "already handed over"
 * on the next attempt.
 */
export async function catchUpInboxForWatchdog(deps: WatchdogDeps, input: { inboxId: string }): Promise<InboxCatchUp> {
  const context = Context.current();
  try {
    const catchUp = createCatchUp({
      db: deps.db,
      agentmail: deps.agentmail,
      taskQueue: context.info.taskQueue,
      operationRetentionDays: deps.config.OPERATION_RETENTION_DAYS,
      // To leave out (and count) the messages a person stopped; without one, the relay's start does.
      temporal: workerClient(context),
    });
    const summary = await catchUp.run({
      inboxId: input.inboxId,
      signal: context.cancellationSignal,
      onProgress: (progress) => context.heartbeat(progress),
    });
    log.info('watchdog catch-up finished', { ...summary });
    if (summary.interrupted)
      throw ApplicationFailure.retryable(`catch-up of ${input.inboxId} interrupted`, 'CatchUpIncomplete');
    return summary;
  } catch (error) {
    // An inbox the webhook covers but that never had a message processed (nothing to resume
    // from), or one deleted at AgentMail since: retrying would not change either.
    const failure = classifyCatchUpError(error);
    if (failure === undefined || failure.kind === 'provider') throw error;
    const notRun = failure.kind === 'no_inbox' ? 'AgentMail has no such inbox (deleted?)' : failure.message;
    log.info('watchdog catch-up not run', { inboxId: input.inboxId, reason: notRun });
    return { inboxId: input.inboxId, notRun };
  }
}

/** The worker's own Temporal client, when the activity has one (not in a bare MockActivityEnvironment). */
function workerClient(context: Context): Client | undefined {
  try {
    return context.client;
  } catch {
    return undefined;
  }
}

async function listWebhooks(agentmail: AgentMailClient): Promise<AgentMail.webhooks.Webhook[]> {
  const webhooks: AgentMail.webhooks.Webhook[] = [];
  let pageToken: string | undefined;
  do {
    const page = await agentmail.webhooks.list({ limit: 100, ...(pageToken ? { pageToken } : {}) });
    webhooks.push(...page.webhooks);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return webhooks;
}

/** Whether a webhook is this deployment's: named in WATCHDOG_WEBHOOK_IDS, else its URL is PUBLIC_WEBHOOK_URL. */
function ownedBy(config: WatchdogDeps['config']): (webhook: AgentMail.webhooks.Webhook) => boolean {
  if (config.WATCHDOG_WEBHOOK_IDS.length > 0)
    return (webhook) => config.WATCHDOG_WEBHOOK_IDS.includes(webhook.webhookId);
  const url = config.PUBLIC_WEBHOOK_URL === undefined ? null : comparableUrl(config.PUBLIC_WEBHOOK_URL);
  return (webhook) => url !== null && comparableUrl(webhook.url) === url;
}

/** A URL as compared: scheme and host in lower case, default port and trailing slash dropped. */
export function comparableUrl(value: string): string | null {
  if (!URL.canParse(value)) return null;
  const url = new URL(value);
  const pathname = url.pathname.replace(/\/+$/, '') || '/';
  return `${url.protocol}//${url.host}${pathname}${url.search}`;
}

const receivesMessages = (webhook: AgentMail.webhooks.Webhook): boolean =>
  !webhook.eventTypes?.length || webhook.eventTypes.includes(MESSAGE_RECEIVED);

/**
 * The SDK's `webhooks.update` has no `enabled` field (its serializer strips it), so this is a raw
 * PATCH through the SDK's passthrough (same auth and base URL). The sandbox honours it; whether
 * AgentMail's production API does is not documented: the answer is checked, and a webhook that
 * still reads disabled is reported, not assumed on. Idempotent: a retry sends the same PATCH.
 */
export async function reenableWebhook(deps: WatchdogDeps, input: { webhookId: string }): Promise<boolean> {
  const { webhookId } = input;
  const response = await deps.agentmail.fetch(`/v0/webhooks/${encodeURIComponent(webhookId)}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ enabled: true }),
  });
  // AgentMail busy or down: try again (the workflow retries this until it gets an answer).
  if (response.status >= 500 || response.status === 429)
    throw new Error(`AgentMail answered ${response.status} to re-enabling webhook ${webhookId}`);
  const body = (await response.json().catch(() => ({}))) as { enabled?: unknown };
  if (response.ok && body.enabled === true) {
    log.warn('AgentMail webhook re-enabled by the watchdog', { webhookId });
    return true;
  }
  log.error(
    'ALERT: the watchdog could not re-enable the AgentMail webhook: re-enable it at AgentMail, then run `npm run replay -- --all`',
    {
      alert: 'webhook_reenable_failed',
      webhookId,
      status: response.status,
    },
  );
  return false;
}

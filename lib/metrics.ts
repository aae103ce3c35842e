import { subscribe } from 'node:diagnostics_channel';
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
  type LabelValues,
} from 'prom-client';
import type { Attributes } from '@opentelemetry/api';
import { annotateActiveSpan } from './tracing';

/**
 * Prometheus metrics, one registry per process, served at /metrics by the API and by the
 * worker's metrics server. Labels are small closed sets: never ids, addresses or keys.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'replyonce_' });

/**
 * A counter whose labels, when counted inside a span, also become that span's attributes
 * (`replyonce.<prefix>.<label>`): the outcome a dashboard counts is the one a trace shows.
 * Labels are small closed sets, so they are as safe in a span as in /metrics.
 */
class SpanAnnotatingCounter<T extends string> extends Counter<T> {
  constructor(configuration: CounterConfiguration<T>, spanPrefix: string) {
    super(configuration);
    // prom-client assigns `inc` per instance (with or without exemplars), so it is wrapped, not overridden.
    const inc = this.inc.bind(this) as (labels?: LabelValues<T> | number, value?: number) => void;
    this.inc = ((labels?: LabelValues<T> | number, value?: number) => {
      if (typeof labels === 'object') annotateActiveSpan(spanAttributes(spanPrefix, labels));
      inc(labels, value);
    }) as Counter<T>['inc'];
  }
}

function spanAttributes(prefix: string, labels: Record<string, string | number | undefined>): Attributes {
  const attributes: Attributes = {};
  for (const [label, value] of Object.entries(labels))
    if (value !== undefined) attributes[`replyonce.${prefix}.${label}`] = value;
  return attributes;
}

export type WebhookOutcome = 'queued' | 'duplicate' | 'ignored' | 'invalid' | 'error';

export const webhooks = new SpanAnnotatingCounter(
  {
    name: 'replyonce_webhooks_total',
    help: 'Webhook deliveries by outcome: queued (new workflow), duplicate, ignored (other event types), invalid (4xx), error (5xx).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  },
  'webhook',
);

export const webhookAckSeconds = new Histogram({
  name: 'replyonce_webhook_ack_seconds',
  help: 'Time from receiving a webhook to answering it (AgentMail gives up at 15 s).',
  labelNames: ['outcome'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
  registers: [registry],
});

export type SendOutcome = 'sent' | 'replayed' | 'conflict' | 'reconciled';

export const sends = new SpanAnnotatingCounter(
  {
    name: 'replyonce_sends_total',
    help: 'Reply sends by outcome: sent (this attempt sent it), replayed (from the operation store), conflict (refused as a reused key), reconciled (found in the thread after the key may have expired).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  },
  'send',
);

export const operations = new SpanAnnotatingCounter(
  {
    name: 'replyonce_operations_total',
    help: 'Operation-store outcomes by operation kind: executed, replayed, failed, in_progress (another attempt held the lease), conflict (same key, different request).',
    labelNames: ['kind', 'status'] as const,
    registers: [registry],
  },
  'operation',
);

export const replays = new Counter({
  name: 'replyonce_replays_total',
  help: 'Messages listed by catch-up replays, by outcome: handed_over (new intake row), already_handed_over, already_answered (labelled replied), skipped (our own).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookEndpointDisabled = new Gauge({
  name: 'replyonce_webhook_endpoint_disabled',
  help: 'AgentMail webhook endpoints the watchdog last found disabled (AgentMail does not redeliver what they missed).',
  registers: [registry],
});

export const webhookEndpointDisabledNotOurs = new Gauge({
  name: 'replyonce_webhook_endpoint_disabled_not_ours',
  help: "Disabled AgentMail webhook endpoints of the organisation that are not this deployment's (not PUBLIC_WEBHOOK_URL, not in WATCHDOG_WEBHOOK_IDS): reported by the watchdog, never changed.",
  registers: [registry],
});

export const skippedTicketsFolded = new Counter({
  name: 'replyonce_skipped_tickets_folded_total',
  help: "Skipped messages that opened no ticket of their own because their inbox's open ticket for skipped mail (TICKET_FOR_SKIPPED_PER_INBOX per TICKET_FOR_SKIPPED_WINDOW) counts them instead, by skip reason.",
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const decisions = new Counter({
  name: 'replyonce_decisions_total',
  help: 'Reply decisions by outcome: reply (a reply owed, its budget reserved) or the skip reason (e.g. inbox-ceiling-reached: the per-inbox circuit breaker tripped, a person answers).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const workflowOutcomes = new Counter({
  name: 'replyonce_workflow_outcomes_total',
  help: 'Inbound-message workflows by how they ended: sent, answered-together (covered by the sent reply of a later message of its burst), skipped (no reply owed), rejected (by a reviewer), handed_off (the agent did not know: a ticket for a person, no email), failed (a non-retryable failure ended the run). Counted by the worker that ran the last workflow task.',
  labelNames: ['status'] as const,
  registers: [registry],
});

export const unansweredMessages = new Gauge({
  name: 'replyonce_unanswered_messages',
  help: 'Inbound-message workflows still running (not waiting for a reviewer) that started more than 15 minutes ago (worker/unanswered.ts); read from Temporal at each scrape.',
  registers: [registry],
});

/** Keeps `replyonce_unanswered_messages` current: `count` runs at each scrape (an error leaves the last value). */
export function countUnansweredOnScrape(count: () => Promise<number>): void {
  (unansweredMessages as Gauge & { collect?: () => Promise<void> }).collect = async () => {
    unansweredMessages.set(await count().catch(() => Number.NaN));
  };
}

/** Which provider a request went to: a closed set, so status codes can be counted per provider. */
export type Provider = 'agentmail' | 'model' | 'helpdesk' | 'other';

export const providerErrors = new Counter({
  name: 'replyonce_provider_errors_total',
  help: 'HTTP calls to providers (AgentMail, the model, the helpdesk) that failed, by provider and status: the HTTP status (4xx/5xx), or "network" for a timeout, reset or refused connection.',
  labelNames: ['provider', 'status'] as const,
  registers: [registry],
});

/**
 * Counts every fetch (undici, which the AgentMail SDK, the model SDKs and the helpdesk client use)
 * that answers 4xx/5xx or fails on the network, by provider (matched on the request's origin).
 * Node's fetch publishes these on diagnostics channels, so no client needs wrapping.
 */
export function countProviderErrors(
  origins: Partial<Record<Exclude<Provider, 'other'>, Array<string | undefined>>>,
): void {
  const byOrigin = new Map<string, Provider>();
  for (const [provider, urls] of Object.entries(origins))
    for (const url of urls) if (url) byOrigin.set(new URL(url).origin, provider as Provider);
  const providerOf = (request: { origin?: unknown }): Provider => {
    try {
      return byOrigin.get(new URL(String(request.origin)).origin) ?? 'other';
    } catch {
      return 'other';
    }
  };
  subscribe('undici:request:headers', (message) => {
    const { request, response } = message as { request: { origin?: unknown }; response: { statusCode: number } };
    if (response.statusCode >= 400)
      providerErrors.inc({ provider: providerOf(request), status: String(response.statusCode) });
  });
  subscribe('undici:request:error', (message) => {
    providerErrors.inc({
      provider: providerOf((message as { request: { origin?: unknown } }).request),
      status: 'network',
    });
  });
}

export const intakeStarts = new Counter({
  name: 'replyonce_intake_starts_total',
  help: 'Workflow starts of the intake, by who made them (starter: right after the commit; relay) and outcome: started, existed (the workflow was there), stopped (its last run was terminated or cancelled by a person: not started again), failed (retried with backoff), left_to_relay (the queue was too slow).',
  labelNames: ['by', 'outcome'] as const,
  registers: [registry],
});

export interface IntakeBacklogReading {
  unstarted: number;
  oldestSeconds: number;
  /** Unstarted rows by state (intake/intake-store.ts BacklogState). */
  byState: Record<string, number>;
}

const INTAKE_BACKLOG_STATES = ['waiting', 'backing_off', 'dead', 'other_queue'] as const;

let readIntakeBacklog: (() => Promise<IntakeBacklogReading>) | undefined;
let intakeBacklogScrape: Promise<IntakeBacklogReading> | undefined;

/** Both gauges come from one query per scrape (shared while it runs). A failed query reports NaN, never a reassuring 0. */
async function scrapeIntakeBacklog(): Promise<IntakeBacklogReading | undefined> {
  if (!readIntakeBacklog) return undefined;
  intakeBacklogScrape ??= readIntakeBacklog().finally(() => (intakeBacklogScrape = undefined));
  return intakeBacklogScrape.catch(() => undefined);
}

let intakeGauges: Array<Gauge<string>> | undefined;

/**
 * The API's intake gauges, read from Postgres at each scrape (`read` is the API's own intake).
 * Only the API registers them: the worker's /metrics would only ever say 0.
 */
export function observeIntakeBacklog(read: () => Promise<IntakeBacklogReading>): void {
  readIntakeBacklog = read;
  intakeGauges ??= [
    new Gauge({
      name: 'replyonce_intake_backlog',
      help:
        'Messages accepted (intake row committed) whose workflow has not been started yet, by state: waiting (new, due), ' +
        'backing_off (a start failed; grows while Temporal is unreachable), dead (set aside after repeated refusals or a day: ' +
        '`npm run replay -- --stuck`), other_queue (rows of another TEMPORAL_TASK_QUEUE, which no relay of this deployment starts).',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        const reading = await scrapeIntakeBacklog();
        for (const state of INTAKE_BACKLOG_STATES)
          this.set({ state }, reading ? (reading.byState[state] ?? 0) : Number.NaN);
      },
    }),
    new Gauge({
      name: 'replyonce_intake_oldest_unstarted_seconds',
      help: 'Age of the oldest accepted message whose workflow has not been started (0: none waiting).',
      registers: [registry],
      async collect() {
        const reading = await scrapeIntakeBacklog();
        this.set(reading ? reading.oldestSeconds : Number.NaN);
      },
    }),
  ];
}

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics, one registry per process, served at /metrics by the API and by the
 * worker's metrics server. Labels are small closed sets: never ids, addresses or keys.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'replyonce_' });

export type WebhookOutcome = 'queued' | 'duplicate' | 'ignored' | 'invalid' | 'error';

export const webhooks = new Counter({
  name: 'replyonce_webhooks_total',
  help: 'Webhook deliveries by outcome: queued (new workflow), duplicate, ignored (other event types), invalid (4xx), error (5xx).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookAckSeconds = new Histogram({
  name: 'replyonce_webhook_ack_seconds',
  help: 'Time from receiving a webhook to answering it (AgentMail gives up at 15 s).',
  labelNames: ['outcome'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
  registers: [registry],
});

export type SendOutcome = 'sent' | 'replayed' | 'conflict' | 'reconciled';

export const sends = new Counter({
  name: 'replyonce_sends_total',
  help: 'Reply sends by outcome: sent (this attempt sent it), replayed (from the operation store), conflict (refused as a reused key), reconciled (found in the thread after the key may have expired).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const operations = new Counter({
  name: 'replyonce_operations_total',
  help: 'Operation-store outcomes by operation kind: executed, replayed, failed, in_progress (another attempt held the lease), conflict (same key, different request).',
  labelNames: ['kind', 'status'] as const,
  registers: [registry],
});

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

export const intakeStarts = new Counter({
  name: 'replyonce_intake_starts_total',
  help: 'Workflow starts of the intake, by who made them (starter: right after the commit; relay) and outcome: started, existed (the workflow was there), failed (retried with backoff), left_to_relay (the queue was too slow).',
  labelNames: ['by', 'outcome'] as const,
  registers: [registry],
});

export interface IntakeBacklogReading {
  unstarted: number;
  oldestSeconds: number;
}

let readIntakeBacklog: (() => Promise<IntakeBacklogReading>) | undefined;
let intakeBacklogScrape: Promise<IntakeBacklogReading> | undefined;

/** Both gauges come from one query per scrape (shared while it runs). A failed query reports NaN, never a reassuring 0. */
async function scrapeIntakeBacklog(): Promise<IntakeBacklogReading | undefined> {
  if (!readIntakeBacklog) return undefined;
  intakeBacklogScrape ??= readIntakeBacklog().finally(() => (intakeBacklogScrape = undefined));
  return intakeBacklogScrape.catch(() => undefined);
}

let intakeGauges: Gauge[] | undefined;

/**
 * The API's intake gauges, read from Postgres at each scrape (`read` is the API's own intake).
 * Only the API registers them: the worker's /metrics would only ever say 0.
 */
export function observeIntakeBacklog(read: () => Promise<IntakeBacklogReading>): void {
  readIntakeBacklog = read;
  intakeGauges ??= [
    new Gauge({
      name: 'replyonce_intake_backlog',
      help: 'Messages accepted (intake row committed) whose workflow has not been started yet: grows while Temporal is unreachable.',
      registers: [registry],
      async collect() {
        const reading = await scrapeIntakeBacklog();
        this.set(reading ? reading.unstarted : Number.NaN);
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

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
  help: 'Messages handled by catch-up replays, by outcome: started, already_answered, skipped, failed.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookEndpointDisabled = new Gauge({
  name: 'replyonce_webhook_endpoint_disabled',
  help: 'AgentMail webhook endpoints the watchdog last found disabled (AgentMail does not redeliver what they missed).',
  registers: [registry],
});

export const decisions = new Counter({
  name: 'replyonce_decisions_total',
  help: 'Reply decisions by outcome: reply (a reply owed, its budget reserved) or the skip reason (e.g. inbox-ceiling-reached: the per-inbox circuit breaker tripped, a person answers).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

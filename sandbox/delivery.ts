import type { Webhook } from 'svix';

/**
 * One delivery attempt, as Svix makes it: POST the exact JSON bytes with svix-id,
 * svix-timestamp and svix-signature. The signature is computed afresh with the real time
 * for every attempt (receivers allow 5 minutes of skew), over the same bytes and svix-id.
 */

export type AttemptTrigger = 'scheduled' | 'duplicate' | 'redeliver';

export interface DeliveryAttempt {
  event_id: string;
  svix_id: string;
  attempt: number;
  trigger: AttemptTrigger;
  url: string;
  status: number | null;
  ok: boolean;
  duration_ms: number;
  error: string | null;
  at: string;
}

export interface Deliverable {
  event_id: string;
  svix_id: string;
  body: string;
}

export interface AttemptContext {
  signer: Webhook;
  url: string;
  attempt: number;
  trigger: AttemptTrigger;
  timeoutMs: number;
  /** Aborts the request when the sandbox resets or closes. */
  lifetime: AbortSignal;
}

export async function deliverOnce(event: Deliverable, context: AttemptContext): Promise<DeliveryAttempt> {
  const sentAt = new Date();
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'Svix-Webhooks/1.x (replyonce sandbox)',
    'svix-id': event.svix_id,
    'svix-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
    'svix-signature': context.signer.sign(event.svix_id, sentAt, event.body),
  };
  const record: DeliveryAttempt = {
    event_id: event.event_id,
    svix_id: event.svix_id,
    attempt: context.attempt,
    trigger: context.trigger,
    url: context.url,
    status: null,
    ok: false,
    duration_ms: 0,
    error: null,
    at: sentAt.toISOString(),
  };
  const started = performance.now();
  try {
    const signal = AbortSignal.any([context.lifetime, AbortSignal.timeout(context.timeoutMs)]);
    const response = await fetch(context.url, { method: 'POST', headers, body: event.body, signal });
    await response.arrayBuffer();
    record.status = response.status;
    // Svix: only 2xx is success; 3xx redirects count as failures.
    record.ok = response.status >= 200 && response.status < 300;
  } catch (error) {
    record.error = describe(error, context.timeoutMs);
  }
  record.duration_ms = Math.round(performance.now() - started);
  return record;
}

function describe(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && error.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  if (error instanceof Error) return error.cause instanceof Error ? error.cause.message : error.message;
  return String(error);
}

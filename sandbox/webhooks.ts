import { randomUUID } from 'node:crypto';
import { Webhook } from 'svix';
import { deliverOnce, type AttemptTrigger, type DeliveryAttempt } from './delivery';
import { ApiError } from './errors';

/**
 * AgentMail's webhook delivery (it runs on Svix): at least once, retried on any non-2xx or
 * timeout per a schedule. One event keeps one svix-id across all its attempts — what Svix
 * receivers dedupe on — while the payload's event_id is AgentMail's business id.
 */

/** Svix counts a delivery as failed without a 2xx within 15 s. */
export const DEFAULT_DELIVERY_TIMEOUT_MS = 15_000;
/** Svix waits 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; tests want the same shape, faster. */
export const DEFAULT_RETRY_SCHEDULE_MS = [0, 200, 1000, 5000];
export const SANDBOX_WEBHOOK_ID = 'ep_sandbox';

/** held: deliver=false; skipped: no URL or endpoint disabled when an attempt was due. */
export type EventStatus = 'held' | 'pending' | 'delivered' | 'failed' | 'skipped';

export interface EventRecord {
  event_id: string;
  svix_id: string;
  event_type: string;
  inbox_id: string;
  message_id: string;
  status: EventStatus;
  attempts: number;
  created_at: string;
  body: string;
}

/** An event plus how many delivery chains (first delivery + duplicates) are still running. */
type LiveEvent = EventRecord & { chains: number };

export interface WebhookEndpoint {
  webhook_id: string;
  url: string | null;
  enabled: boolean;
  event_types: string[] | null;
  inbox_ids: string[] | null;
  created_at: string;
  updated_at: string;
}
export type EndpointChange = {
  [K in keyof Omit<WebhookEndpoint, 'webhook_id' | 'created_at' | 'updated_at'>]?: WebhookEndpoint[K] | undefined;
};

export interface DispatcherOptions {
  secret: string;
  url?: string | undefined;
  retryScheduleMs: number[];
  timeoutMs: number;
  onError: (error: unknown, event: EventRecord) => void;
}

export interface PublishOptions {
  deliver: boolean;
  duplicates: number;
  eventId?: string | undefined;
}

export const newEventId = (): string => `evt_${randomUUID().replaceAll('-', '')}`;
const newSvixId = (): string => `msg_${randomUUID().replaceAll('-', '')}`;

export class WebhookDispatcher {
  private readonly signer: Webhook;
  private readonly events = new Map<string, LiveEvent>();
  readonly attempts: DeliveryAttempt[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Aborted on reset/close so in-flight deliveries stop and never write into fresh state. */
  private lifetime = new AbortController();
  endpoint: WebhookEndpoint;

  constructor(private readonly options: DispatcherOptions) {
    this.signer = new Webhook(options.secret);
    this.endpoint = initialEndpoint(options.url);
  }

  get secret(): string {
    return this.options.secret;
  }

  configure(change: EndpointChange): WebhookEndpoint {
    const defined = Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined));
    this.endpoint = { ...this.endpoint, ...defined, updated_at: new Date().toISOString() };
    return this.endpoint;
  }

  publish(
    eventType: string,
    ref: { inbox_id: string; message_id: string },
    build: (eventId: string) => object,
    options: PublishOptions,
  ): EventRecord {
    const eventId = options.eventId ?? newEventId();
    if (this.events.has(eventId)) throw ApiError.conflict(`event ${eventId} already exists`, 'event_exists');
    const event: LiveEvent = {
      event_id: eventId,
      svix_id: newSvixId(),
      event_type: eventType,
      inbox_id: ref.inbox_id,
      message_id: ref.message_id,
      status: 'held',
      attempts: 0,
      created_at: new Date().toISOString(),
      body: JSON.stringify(build(eventId)),
      chains: 0,
    };
    this.events.set(eventId, event);
    if (options.deliver) {
      this.startChain(event, 'scheduled');
      for (let i = 0; i < options.duplicates; i++) this.startChain(event, 'duplicate');
    }
    return event;
  }

  /** The same message under a new event_id and svix-id, as when AgentMail emits it again. */
  resendAsNew(eventId: string): EventRecord {
    const original = this.event(eventId);
    const payload = JSON.parse(original.body) as Record<string, unknown>;
    const ref = { inbox_id: original.inbox_id, message_id: original.message_id };
    return this.publish(original.event_type, ref, (id) => ({ ...payload, event_id: id }), {
      deliver: true,
      duplicates: 0,
    });
  }

  /** One extra attempt now, same svix-id, outside the retry schedule (Svix "resend"). */
  async redeliver(eventId: string): Promise<DeliveryAttempt> {
    const event = this.event(eventId);
    if (!this.accepts(event))
      throw ApiError.conflict(
        'the webhook endpoint has no URL, is disabled, or filters this event out',
        'endpoint_inactive',
      );
    const attempt = await this.attempt(event, 'redeliver');
    if (attempt.ok) event.status = 'delivered';
    return attempt;
  }

  hasEvent(eventId: string): boolean {
    return this.events.has(eventId);
  }

  event(eventId: string): LiveEvent {
    const event = this.events.get(eventId);
    if (!event) throw ApiError.notFound('Event');
    return event;
  }

  listEvents(): EventRecord[] {
    return [...this.events.values()].map(({ chains: _chains, ...event }) => event);
  }

  reset(): void {
    this.close();
    this.lifetime = new AbortController();
    this.events.clear();
    this.attempts.length = 0;
    this.endpoint = initialEndpoint(this.options.url);
  }

  close(): void {
    this.lifetime.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private startChain(event: LiveEvent, trigger: AttemptTrigger): void {
    event.chains += 1;
    if (event.status !== 'delivered') event.status = 'pending';
    this.scheduleAttempt(event, 0, trigger);
  }

  /** Attempt `index` of one chain; a failure schedules the next until the schedule runs out. */
  private scheduleAttempt(event: LiveEvent, index: number, trigger: AttemptTrigger): void {
    const delay = this.options.retryScheduleMs[index];
    if (delay === undefined) return this.endChain(event, 'failed');
    const signal = this.lifetime.signal;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.accepts(event)) return this.endChain(event, 'skipped');
      this.attempt(event, trigger)
        .then((attempt) => {
          if (signal.aborted) return;
          if (attempt.ok) return this.endChain(event, 'delivered');
          this.scheduleAttempt(event, index + 1, trigger);
        })
        .catch((error: unknown) => this.options.onError(error, event));
    }, delay);
    this.timers.add(timer);
  }

  private endChain(event: LiveEvent, outcome: EventStatus): void {
    event.chains -= 1;
    if (outcome === 'delivered') event.status = 'delivered';
    else if (event.chains === 0 && event.status !== 'delivered') event.status = outcome;
  }

  private accepts(event: EventRecord): boolean {
    const { url, enabled, event_types, inbox_ids } = this.endpoint;
    if (url === null || !enabled) return false;
    return (
      (event_types === null || event_types.includes(event.event_type)) &&
      (inbox_ids === null || inbox_ids.includes(event.inbox_id))
    );
  }

  private async attempt(event: EventRecord, trigger: AttemptTrigger): Promise<DeliveryAttempt> {
    const lifetime = this.lifetime.signal;
    event.attempts += 1;
    const url = this.endpoint.url ?? '';
    const record = await deliverOnce(event, {
      signer: this.signer,
      url,
      attempt: event.attempts,
      trigger,
      timeoutMs: this.options.timeoutMs,
      lifetime,
    });
    if (!lifetime.aborted) this.attempts.push(record);
    return record;
  }
}

function initialEndpoint(url: string | undefined): WebhookEndpoint {
  const now = new Date().toISOString();
  return {
    webhook_id: SANDBOX_WEBHOOK_ID,
    url: url ?? null,
    enabled: true,
    event_types: null,
    inbox_ids: null,
    created_at: now,
    updated_at: now,
  };
}

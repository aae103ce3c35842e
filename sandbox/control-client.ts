import type { FaultRule, FaultRuleInput } from './faults';
import type { KeyRecord } from './idempotency';
import type { OutboxEntry } from './mailbox';
import type { InboundRequest } from './routes/control';
import type { SandboxState } from './state';
import type { DeliveryAttempt } from './delivery';
import type { EventRecord, WebhookEndpoint } from './webhooks';
import type { MessageRaw, MessageReceivedEventRaw, ThreadItemRaw } from './wire';

/** A fault rule as tests write it: `path` may be a RegExp, sent as `path_regex`. */
export type FaultSpec = Omit<FaultRuleInput, 'match'> & {
  match?: { method?: string; path?: string | RegExp; count?: number };
};

export interface InboundResult {
  event_id: string;
  svix_id: string;
  message: MessageRaw;
  thread: ThreadItemRaw;
}

/**
 * The message.received body AgentMail posts for a stored message (the sandbox's own webhook sends
 * the same), under any event id: for a test, the bench or the soak that delivers it itself.
 */
export function messageReceivedBody(inbound: Pick<InboundResult, 'message' | 'thread'>, eventId: string): string {
  const event: MessageReceivedEventRaw = {
    type: 'event',
    event_type: 'message.received',
    event_id: eventId,
    message: inbound.message,
    thread: inbound.thread,
  };
  return JSON.stringify(event);
}

export type SandboxCounts = ReturnType<SandboxState['counts']>;
export type EventSummary = Omit<EventRecord, 'body'>;

export class SandboxControlError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    route: string,
  ) {
    super(`sandbox control ${route} answered ${status}: ${JSON.stringify(body)}`);
    this.name = 'SandboxControlError';
  }
}

/** Typed client for the sandbox's /_sandbox control API (plain fetch, for tests and scripts). */
export class SandboxControl {
  constructor(readonly baseUrl: string) {}

  createInbox(inboxId: string, displayName?: string): Promise<unknown> {
    return this.call('POST', '/_sandbox/inboxes', {
      inbox_id: inboxId,
      ...(displayName ? { display_name: displayName } : {}),
    });
  }

  /** A message arrives; unless `deliver: false`, its message.received webhook is on its way. */
  inbound(request: InboundRequest): Promise<InboundResult> {
    return this.call('POST', '/_sandbox/inbound', request);
  }

  async outbox(filter: { inbox_id?: string; in_reply_to?: string } = {}): Promise<OutboxEntry[]> {
    const query = new URLSearchParams(Object.entries(filter).filter((e): e is [string, string] => e[1] !== undefined));
    const { entries } = await this.call<{ entries: OutboxEntry[] }>(
      'GET',
      `/_sandbox/outbox${query.size ? `?${query.toString()}` : ''}`,
    );
    return entries;
  }

  /** Replaces every rule; `[]` clears. */
  async setFaults(rules: FaultSpec | FaultSpec[]): Promise<FaultRule[]> {
    const list = (Array.isArray(rules) ? rules : [rules]).map(({ match = {}, ...rule }) => {
      const { path, ...rest } = match;
      return {
        ...rule,
        match: {
          ...rest,
          ...(path instanceof RegExp ? { path_regex: path.source } : path !== undefined ? { path } : {}),
        },
      };
    });
    return (await this.call<{ rules: FaultRule[] }>('POST', '/_sandbox/faults', { rules: list })).rules;
  }

  /** The armed rules with their hit counts (a zero-delay rule counts requests). */
  async faults(): Promise<FaultRule[]> {
    return (await this.call<{ rules: FaultRule[] }>('GET', '/_sandbox/faults')).rules;
  }

  async clearFaults(): Promise<void> {
    await this.call('DELETE', '/_sandbox/faults');
  }

  advanceClock(ms: number): Promise<{ now: string; offset_ms: number }> {
    return this.call('POST', '/_sandbox/clock/advance', { ms });
  }

  async deliveries(eventId?: string): Promise<DeliveryAttempt[]> {
    const query = eventId ? `?event_id=${encodeURIComponent(eventId)}` : '';
    return (await this.call<{ attempts: DeliveryAttempt[] }>('GET', `/_sandbox/deliveries${query}`)).attempts;
  }

  /** Polls until `done(attempts)` holds; the attempts are returned. */
  async waitForDeliveries(
    done: (attempts: DeliveryAttempt[]) => boolean,
    options: { eventId?: string; timeoutMs?: number } = {},
  ): Promise<DeliveryAttempt[]> {
    const deadline = Date.now() + (options.timeoutMs ?? 5000);
    for (;;) {
      const attempts = await this.deliveries(options.eventId);
      if (done(attempts)) return attempts;
      if (Date.now() > deadline)
        throw new Error(`deliveries did not reach the expected state in time: ${JSON.stringify(attempts)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async events(): Promise<EventSummary[]> {
    return (await this.call<{ events: EventSummary[] }>('GET', '/_sandbox/events')).events;
  }

  /** One more attempt now, same svix-id; resolves with that attempt. */
  redeliver(eventId: string): Promise<DeliveryAttempt> {
    return this.call('POST', `/_sandbox/events/${encodeURIComponent(eventId)}/redeliver`, {});
  }

  resendAsNew(eventId: string): Promise<{ event_id: string; svix_id: string }> {
    return this.call('POST', `/_sandbox/events/${encodeURIComponent(eventId)}/resend-as-new`, {});
  }

  setWebhook(change: { url?: string | null; enabled?: boolean }): Promise<WebhookEndpoint> {
    return this.call('POST', '/_sandbox/webhook', change);
  }

  /** Another webhook of the organisation, listed by /v0/webhooks beside the sandbox's own (never delivered to). */
  addOtherWebhook(webhook: {
    webhook_id: string;
    url: string;
    enabled?: boolean;
    event_types?: string[];
  }): Promise<unknown> {
    return this.call('POST', '/_sandbox/webhooks/others', webhook);
  }

  async idempotencyKeys(): Promise<KeyRecord[]> {
    return (await this.call<{ keys: KeyRecord[] }>('GET', '/_sandbox/idempotency-keys')).keys;
  }

  reset(): Promise<SandboxCounts> {
    return this.call('POST', '/_sandbox/reset', {});
  }

  state(): Promise<SandboxCounts> {
    return this.call('GET', '/_sandbox/state');
  }

  /** Every API request but a read (sends, drafts, labels…), in order. */
  async writes(): Promise<Array<{ method: string; path: string; at: string }>> {
    return (await this.call<{ writes: Array<{ method: string; path: string; at: string }> }>('GET', '/_sandbox/writes'))
      .writes;
  }

  private async call<T>(method: string, route: string, body?: unknown): Promise<T> {
    const response = await fetch(new URL(route, this.baseUrl), {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const parsed: unknown = await response.json();
    if (!response.ok) throw new SandboxControlError(response.status, parsed, `${method} ${route}`);
    return parsed as T;
  }
}

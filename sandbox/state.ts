import { AttachmentStore } from './attachments';
import { VirtualClock } from './clock';
import { DraftStore } from './drafts';
import { Faults } from './faults';
import { IdempotencyStore } from './idempotency';
import { Mailbox } from './mailbox';
import type { WebhookDispatcher } from './webhooks';
import type { WebhookRaw } from './wire';

/** Everything the sandbox remembers, in one place so reset and the counts stay complete. */
export class SandboxState {
  readonly clock = new VirtualClock();
  readonly mailbox = new Mailbox(this.clock);
  readonly attachments = new AttachmentStore(this.clock);
  readonly drafts = new DraftStore(this.clock);
  readonly idempotency = new IdempotencyStore(this.clock);
  readonly faults = new Faults();
  /**
   * The organisation's other webhooks (another deployment's, a colleague's): listed and updatable
   * like AgentMail's, never delivered to. Added by a test through /_sandbox/webhooks/others.
   */
  readonly otherWebhooks: WebhookRaw[] = [];
  /**
   * Every API request that could change something at AgentMail (any method but GET/HEAD on /v0):
   * what a rehearsal must never make, and tests count.
   */
  readonly writes: Array<{ method: string; path: string; at: string }> = [];

  constructor(readonly webhooks: WebhookDispatcher) {}

  /** Back to a fresh start: the webhook endpoint returns to its configured URL, enabled. */
  reset(): void {
    this.clock.reset();
    this.mailbox.reset();
    this.attachments.reset();
    this.drafts.reset();
    this.idempotency.reset();
    this.faults.clear();
    this.webhooks.reset();
    this.otherWebhooks.length = 0;
    this.writes.length = 0;
  }

  counts() {
    const { inboxes, messages, sent } = this.mailbox.counts();
    return {
      inboxes,
      messages,
      sent,
      drafts: this.drafts.size,
      idempotency_keys: this.idempotency.size,
      events: this.webhooks.listEvents().length,
      deliveries: this.webhooks.attempts.length,
      faults: this.faults.list().length,
      clock: { now: this.clock.iso(), offset_ms: this.clock.offsetMs },
      webhook: { url: this.webhooks.endpoint.url, enabled: this.webhooks.endpoint.enabled },
    };
  }
}

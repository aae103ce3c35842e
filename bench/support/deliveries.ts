import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { Webhook } from 'svix';
import { messageReceivedBody, type InboundResult } from '../../sandbox/control-client';
import type { Delivery } from './load';

/**
 * What the load generator sends: AgentMail `message.received` events for messages that exist
 * in the sandbox (so the worker's workflows do their real work), signed with Svix ahead of the
 * run so signing is never measured.
 */

export interface SeededMessage {
  inboxId: string;
  messageId: string;
  /** The event body (JSON) exactly as AgentMail would post it, with its first event id. */
  eventId: string;
  body: string;
}

/** Inboxes the bench's mail is spread over (one email is one job per inbox; a few busy inboxes). */
export const INBOXES = Array.from({ length: 8 }, (_, i) => `support-${i}@sandbox.agentmail.local`);

/**
 * Creates `count` messages in the sandbox (no webhook: the bench delivers them itself), each
 * from its own sender, as customers write, spread over `inboxes`. Returns them in creation order.
 */
export async function seedMessages(
  sandboxUrl: string,
  count: number,
  onProgress?: (done: number) => void,
  inboxes: readonly string[] = INBOXES,
): Promise<SeededMessage[]> {
  const tag = randomUUID().slice(0, 8);
  const pool = new Pool(sandboxUrl, { connections: 8 });
  const messages = new Array<SeededMessage>(count);
  let next = 0;
  let done = 0;
  const lane = async () => {
    while (next < count) {
      const index = next++;
      const inboxId = inboxes[index % inboxes.length] as string;
      const response = await pool.request({
        path: '/_sandbox/inbound',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          inbox_id: inboxId,
          from: `Customer ${index} <customer-${tag}-${index}@example.com>`,
          subject: `Order ${tag}-${index}`,
          text: `Hello, where is my order ${tag}-${index}? It was due last week. Thank you.`,
          deliver: false,
        }),
      });
      const answer = (await response.body.json()) as InboundResult;
      if (response.statusCode !== 200)
        throw new Error(`the sandbox refused a message: ${response.statusCode} ${JSON.stringify(answer)}`);
      messages[index] = {
        inboxId,
        messageId: answer.message.message_id,
        eventId: answer.event_id,
        body: messageReceivedBody(answer, answer.event_id),
      };
      done += 1;
      if (done % 500 === 0) onProgress?.(done);
    }
  };
  try {
    await Promise.all(Array.from({ length: 8 }, lane));
  } finally {
    await pool.close();
  }
  return messages;
}

/** Event bodies shaped like `template`, with fresh event and message ids: same size, new identity. */
export function bodiesLike(template: SeededMessage, count: number): string[] {
  const tag = randomUUID().slice(0, 8);
  return Array.from({ length: count }, (_, i) => {
    // Same length as the template's ids, so every body has the template's size.
    const eventId = `evt_${`${tag}${i.toString(36)}`.padEnd(template.eventId.length - 4, 'x')}`;
    const messageId = `<${`${tag}-${i.toString(36)}`.padEnd(template.messageId.length - 2, 'y')}>`;
    return template.body.replaceAll(template.eventId, eventId).replaceAll(template.messageId, messageId);
  });
}

/** Signs deliveries now (Svix allows 5 minutes of skew; every run is far shorter). */
export class Signer {
  private readonly webhook: Webhook;

  constructor(secret: string) {
    this.webhook = new Webhook(secret);
  }

  /** One delivery of `body`; a retry of the same event reuses its svix-id. */
  sign(body: string, svixId = `msg_${randomUUID().replaceAll('-', '')}`, at = new Date()): Delivery {
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Svix-Webhooks/1.x (replyonce bench)',
        'svix-id': svixId,
        'svix-timestamp': String(Math.floor(at.getTime() / 1000)),
        'svix-signature': this.webhook.sign(svixId, at, body),
      },
    };
  }
}

/** Deterministic shuffles and draws, so a run's delivery plan can be told and repeated. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'svix';

/** Signs a body the way Svix does for AgentMail, so tests can post deliveries of their own. */
export function signedHeaders(
  secret: string,
  body: string,
  options: { msgId?: string; timestamp?: Date } = {},
): Record<string, string> {
  const msgId = options.msgId ?? `msg_${randomUUID()}`;
  const timestamp = options.timestamp ?? new Date();
  return {
    'content-type': 'application/json',
    'svix-id': msgId,
    'svix-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'svix-signature': new Webhook(secret).sign(msgId, timestamp, body),
  };
}

export function messageReceivedPayload(fields: {
  eventId?: string;
  inboxId: string;
  messageId: string;
  threadId?: string;
}) {
  const now = new Date().toISOString();
  return {
    type: 'event',
    event_type: 'message.received',
    event_id: fields.eventId ?? `evt_${randomUUID()}`,
    message: {
      inbox_id: fields.inboxId,
      thread_id: fields.threadId ?? `thr_${randomUUID()}`,
      message_id: fields.messageId,
      labels: ['received', 'unread'],
      timestamp: now,
      from: 'customer@example.com',
      to: [fields.inboxId],
      subject: 'Hello',
      text: 'Where is my order?',
      size: 100,
      updated_at: now,
      created_at: now,
    },
    thread: {},
  };
}

/** A fresh test webhook secret in Svix's format. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

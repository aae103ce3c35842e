import { z } from 'zod';

/**
 * What the ingress needs from AgentMail's webhook payload, and no more: the envelope for
 * every event type, and the ids of a received message. Everything else (bodies, addresses)
 * is read by the workflow's activities from AgentMail itself.
 */

/** Postgres text cannot hold U+0000: refused here (422), not by the insert (500, retried for a day). */
const storableText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => !s.includes('\u0000'), 'must not contain U+0000');

/**
 * RFC 5322 caps a header line at 998 octets. Counting bytes, not characters, also keeps the id
 * under Temporal's 2 KiB limit on a search attribute's value (MessageId, ThreadId).
 */
const headerId = storableText(998).refine(
  (s) => Buffer.byteLength(s, 'utf8') <= 998,
  'must be at most 998 bytes in UTF-8',
);

export const eventEnvelope = z.object({
  event_type: storableText(100),
  event_id: storableText(255),
});

export const messageReceivedEvent = eventEnvelope.extend({
  event_type: z.literal('message.received'),
  message: z.object({
    inbox_id: storableText(320),
    message_id: headerId,
    thread_id: headerId.optional(),
    /**
     * When the message arrived at AgentMail: it advances the inbox's catch-up cursor. Lenient on
     * purpose: a missing or unreadable time costs only the cursor update, never the reply.
     */
    timestamp: z.unknown().optional().transform(messageTime),
  }),
});

function messageTime(value: unknown): Date | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  const at = new Date(value);
  // Inside what Postgres's timestamptz holds, so an odd value can never fail the event's insert.
  const year = at.getUTCFullYear();
  return Number.isNaN(at.getTime()) || year < 1970 || year > 9999 ? undefined : at;
}

export type MessageReceivedEvent = z.infer<typeof messageReceivedEvent>;

/** Compact, loggable description of a schema failure (paths only: values may be customer data). */
export const describeIssues = (error: z.ZodError): string =>
  error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');

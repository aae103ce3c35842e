import { z } from 'zod';

/**
 * What the ingress needs from AgentMail's webhook payload, and no more: the envelope for
 * every event type, and the ids of a received message. Everything else (bodies, addresses)
 * is read by the workflow's activities from AgentMail itself.
 */

export const eventEnvelope = z.object({
  event_type: z.string().min(1).max(100),
  event_id: z.string().min(1).max(255),
});

export const messageReceivedEvent = eventEnvelope.extend({
  event_type: z.literal('message.received'),
  message: z.object({
    inbox_id: z.string().min(1).max(320),
    message_id: z.string().min(1).max(998),
    thread_id: z.string().min(1).max(998).optional(),
  }),
});

export type EventEnvelope = z.infer<typeof eventEnvelope>;
export type MessageReceivedEvent = z.infer<typeof messageReceivedEvent>;

/** Compact, loggable description of a schema failure (paths only: values may be customer data). */
export const describeIssues = (error: z.ZodError): string =>
  error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');

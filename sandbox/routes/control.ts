import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../errors';
import { faultRuleSchema } from '../faults';
import { summarizeThread } from '../views';
import { parseBody } from '../schemas';
import type { SandboxState } from '../state';
import type { MessageReceivedEventRaw } from '../wire';

/**
 * The control API (/_sandbox): what a test or a developer does to the world around the app —
 * mail arrives, the clock jumps, faults are armed — and what they inspect afterwards.
 * No auth: the sandbox listens on loopback and holds nothing real.
 */
const addresses = z.union([z.string(), z.array(z.string())]).transform((v) => (Array.isArray(v) ? v : [v]));
/**
 * An attachment of an arriving message: its bytes as base64 (`content`, as AgentMail's
 * SendAttachment takes them) or as `text`; `repeat` multiplies them (a large file without a large
 * request). The message lists its metadata; the bytes are fetched by their signed URL.
 */
const inboundAttachmentSchema = z
  .object({
    filename: z.string().optional(),
    content_type: z.string().optional(),
    content_disposition: z.enum(['inline', 'attachment']).optional(),
    content_id: z.string().optional(),
    content: z.base64().optional(),
    text: z.string().optional(),
    repeat: z.number().int().min(1).max(100_000).default(1),
  })
  .refine((a) => a.content === undefined || a.text === undefined, 'give content (base64) or text, not both');

const inboundSchema = z.object({
  inbox_id: z.string().min(1),
  from: z.string().min(1),
  to: addresses.optional(),
  cc: addresses.optional(),
  reply_to: addresses.optional(),
  subject: z.string().optional(),
  text: z.string().optional(),
  html: z.string().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  message_id: z.string().min(1).optional(),
  thread_id: z.string().min(1).optional(),
  in_reply_to: z.string().min(1).optional(),
  references: z.array(z.string()).optional(),
  labels: z.array(z.string()).optional(),
  attachments: z.array(inboundAttachmentSchema).max(500).optional(),
  /** When the message arrived (default: the sandbox's now): old mail, as a late replay finds it. */
  timestamp: z.iso.datetime({ offset: true }).optional(),
  /** false: store the message and its event, deliver nothing (redeliver later). */
  deliver: z.boolean().default(true),
  /** Extra deliveries of the same event (same event_id and svix-id), started together. */
  duplicates: z.number().int().min(0).max(50).default(0),
  event_id: z.string().min(1).optional(),
});
export type InboundRequest = z.input<typeof inboundSchema>;

const faultsSchema = z.union([
  faultRuleSchema,
  z.array(faultRuleSchema),
  z.object({ rules: z.array(faultRuleSchema) }),
]);

export function controlRoutes(app: FastifyInstance, state: SandboxState): void {
  const { mailbox, webhooks } = state;

  app.post('/_sandbox/inboxes', async (request) => {
    const body = parseBody(
      z.object({ inbox_id: z.string().min(1), display_name: z.string().optional() }),
      request.body,
    );
    return mailbox.ensureInbox(body.inbox_id, body.display_name);
  });

  app.post('/_sandbox/inbound', async (request) => {
    const { deliver, duplicates, event_id, labels, to, attachments, ...fields } = parseBody(
      inboundSchema,
      request.body,
    );
    // Checked before storing, so a refused event leaves no orphan message behind.
    if (event_id !== undefined && webhooks.hasEvent(event_id))
      throw ApiError.conflict(`event ${event_id} already exists`, 'event_exists');
    mailbox.ensureInbox(fields.inbox_id);
    const recipients = to ?? [fields.inbox_id];
    const message = mailbox.addMessage({
      ...fields,
      to: recipients,
      labels: labels ?? ['received', 'unread'],
      attachments: (attachments ?? []).map(({ content, text, repeat, ...meta }) =>
        state.attachments.add({
          ...meta,
          bytes: Buffer.concat(
            Array.from({ length: repeat }, () =>
              content !== undefined ? Buffer.from(content, 'base64') : Buffer.from(text ?? '', 'utf8'),
            ),
          ),
        }),
      ),
      // A received email always carries headers (RFC 5322 requires From and Date): the ones its
      // fields imply, then those the test gives, which win.
      headers: {
        From: fields.from,
        To: recipients.join(', '),
        ...(fields.subject != null ? { Subject: fields.subject } : {}),
        Date: new Date(fields.timestamp ?? state.clock.iso()).toUTCString(),
        ...fields.headers,
      },
    });
    const thread = summarizeThread(mailbox.threadMessages(message.inbox_id, message.thread_id).map((m) => m.value));
    const build = (id: string): MessageReceivedEventRaw => ({
      type: 'event',
      event_type: 'message.received',
      event_id: id,
      message,
      thread,
    });
    const event = webhooks.publish('message.received', message, build, { deliver, duplicates, eventId: event_id });
    return { event_id: event.event_id, svix_id: event.svix_id, message, thread };
  });

  app.get<{ Querystring: { inbox_id?: string; in_reply_to?: string } }>('/_sandbox/outbox', async (request) => {
    const { inbox_id, in_reply_to } = request.query;
    const entries = mailbox.outbox.filter(
      ({ message }) =>
        (!inbox_id || message.inbox_id === inbox_id) && (!in_reply_to || message.in_reply_to === in_reply_to),
    );
    return { count: entries.length, entries };
  });

  app.get('/_sandbox/state', async () => state.counts());
  app.get('/_sandbox/writes', async () => ({ count: state.writes.length, writes: state.writes }));
  app.get('/_sandbox/idempotency-keys', async () => ({ keys: state.idempotency.list() }));

  app.post('/_sandbox/reset', async () => {
    state.reset();
    return state.counts();
  });

  app.get('/_sandbox/clock', async () => ({ now: state.clock.iso(), offset_ms: state.clock.offsetMs }));
  app.post('/_sandbox/clock/advance', async (request) => {
    const { ms } = parseBody(z.object({ ms: z.number().int().min(0) }), request.body);
    state.clock.advance(ms);
    return { now: state.clock.iso(), offset_ms: state.clock.offsetMs };
  });

  /** Replaces all rules (an empty list clears them). */
  app.post('/_sandbox/faults', async (request) => {
    const body = parseBody(faultsSchema, request.body);
    const rules = Array.isArray(body) ? body : 'rules' in body ? body.rules : [body];
    return { rules: state.faults.set(rules) };
  });
  app.get('/_sandbox/faults', async () => ({ rules: state.faults.list() }));
  app.delete('/_sandbox/faults', async () => {
    state.faults.clear();
    return { rules: [] };
  });
}

import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { HelpdeskFaults, helpdeskFaultSchema } from './faults';

/**
 * A local stand-in for Zendesk Support's Tickets API (developer.zendesk.com/api-reference/
 * ticketing/tickets/tickets), the part replyonce uses, with its documented idempotency rules:
 *  - `Idempotency-Key` on `POST /api/v2/tickets`: up to 255 characters, kept 2 hours; a repeat
 *    inside the window returns the original response with `x-idempotency-lookup: hit` (a first
 *    use says `miss`); the same key with another body is 400 `IdempotentRequestError`.
 *  - `GET /api/v2/tickets?external_id=…` lists the tickets carrying an external id.
 *  - `PUT /api/v2/tickets/{id}` with `ticket.comment` adds a comment (no idempotency key: Zendesk
 *    takes none on updates), `ticket.status` changes the status; a closed ticket cannot be
 *    updated (422). Every change is an audit: `GET /api/v2/tickets/{id}/audits` lists them, with
 *    `Comment` events, and `GET /api/v2/tickets/{id}/comments` the comments.
 * Zendesk does not document its answer to a repeat that arrives while the first is still being
 * processed; the stand-in answers 409 (`IdempotentRequestInProgress`), which the adapter retries.
 * API token auth: `Authorization: Basic base64(<email>/token:<token>)`.
 */

/** Zendesk keeps an idempotency key for 2 hours. */
export const IDEMPOTENCY_TTL_MS = 2 * 60 * 60 * 1000;
const MAX_KEY_LENGTH = 255;

export interface HelpdeskOptions {
  email: string;
  apiToken: string;
  logger?: FastifyBaseLogger | boolean | undefined;
}

export interface HelpdeskTicket {
  id: number;
  url: string;
  external_id: string | null;
  subject: string | null;
  description: string;
  status: 'new' | 'open' | 'pending' | 'solved' | 'closed';
  tags: string[];
  created_at: string;
  updated_at: string;
}

export interface HelpdeskRequestRecord {
  seq: number;
  method: string;
  path: string;
  /** The path with its query string, as sent. */
  url: string;
  idempotency_key: string | null;
  /** hit/miss for creates with a key; the status the stand-in answered (null: connection dropped). */
  lookup: 'hit' | 'miss' | null;
  status: number | null;
  fault: string | null;
}

export interface HelpdeskComment {
  id: number;
  type: 'Comment';
  body: string;
  plain_body: string;
  public: boolean;
  created_at: string;
}

export interface HelpdeskAudit {
  id: number;
  ticket_id: number;
  created_at: string;
  events: Array<HelpdeskComment | { id: number; type: 'Create' | 'Change'; field_name?: string; value?: string }>;
}

interface KeyRecord {
  fingerprint: string;
  createdAtMs: number;
  response: { status: number; body: unknown } | null;
}

const createSchema = z.object({
  ticket: z
    .object({
      subject: z.string().optional(),
      comment: z
        .object({ body: z.string().optional(), html_body: z.string().optional(), public: z.boolean().optional() })
        .optional(),
      description: z.string().optional(),
      external_id: z.string().max(255).optional(),
      tags: z.array(z.string()).optional(),
    })
    .passthrough(),
});

const updateSchema = z.object({
  ticket: z
    .object({
      comment: z
        .object({ body: z.string().optional(), html_body: z.string().optional(), public: z.boolean().optional() })
        .optional(),
      status: z.enum(['new', 'open', 'pending', 'hold', 'solved', 'closed']).optional(),
    })
    .passthrough(),
});

export interface Helpdesk {
  app: FastifyInstance;
  tickets: HelpdeskTicket[];
  audits: HelpdeskAudit[];
  requests: HelpdeskRequestRecord[];
}

export function buildHelpdeskStandIn(options: HelpdeskOptions): Helpdesk {
  const app = Fastify({
    ...(typeof options.logger === 'object' ? { loggerInstance: options.logger } : { logger: options.logger ?? false }),
  });
  const expected = `Basic ${Buffer.from(`${options.email}/token:${options.apiToken}`).toString('base64')}`;
  const tickets: HelpdeskTicket[] = [];
  const audits: HelpdeskAudit[] = [];
  let nextEventId = 1;
  const requests: HelpdeskRequestRecord[] = [];
  const keys = new Map<string, KeyRecord>();
  const faults = new HelpdeskFaults();
  let clockOffsetMs = 0;
  const now = () => Date.now() + clockOffsetMs;
  const records = new WeakMap<FastifyRequest, HelpdeskRequestRecord>();

  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/api/v2/')) return undefined;
    const path = request.url.split('?', 1)[0] ?? request.url;
    const key = request.headers['idempotency-key'];
    const record: HelpdeskRequestRecord = {
      seq: requests.length + 1,
      method: request.method,
      path,
      url: request.url,
      idempotency_key: typeof key === 'string' ? key : null,
      lookup: null,
      status: null,
      fault: null,
    };
    requests.push(record);
    records.set(request, record);
    if (request.headers.authorization !== expected) return reply.code(401).send({ error: "Couldn't authenticate you" });
    const fault = faults.draw(request.method, path);
    if (!fault) return undefined;
    record.fault = fault.action;
    (request as FastifyRequest & { fault?: typeof fault }).fault = fault;
    if (fault.action === 'delay') await sleep(fault.ms ?? 1_000);
    if (fault.action === 'drop-before-commit') {
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    if (fault.action === 'rate-limit') {
      return reply
        .code(429)
        .header('retry-after', String(fault.retry_after_seconds ?? 1))
        .send({ error: 'TooManyRequests', description: 'Rate limit exceeded (injected)' });
    }
    if (fault.action === 'status')
      return reply
        .code(fault.status ?? 500)
        .send({ error: 'InternalError', description: `injected fault: status ${fault.status ?? 500}` });
    return undefined;
  });

  // After the work is done: record the status, or drop the answer (the ticket stays created).
  app.addHook('onSend', async (request, reply, payload) => {
    const record = records.get(request);
    if (record) record.status = reply.statusCode;
    if ((request as FastifyRequest & { fault?: { action: string } }).fault?.action === 'drop-after-commit') {
      if (record) record.status = null;
      request.raw.socket.destroy();
    }
    return payload;
  });

  const createTicket = async (request: FastifyRequest, reply: FastifyReply) => {
    const record = records.get(request);
    const header = request.headers['idempotency-key'];
    const key = typeof header === 'string' ? header : null;
    if (key !== null && (key.length === 0 || key.length > MAX_KEY_LENGTH)) {
      return reply.code(400).send({
        error: 'InvalidIdempotencyKey',
        description: `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`,
      });
    }
    const fingerprint = createHash('sha256')
      .update(JSON.stringify(request.body ?? null))
      .digest('hex');
    if (key !== null) {
      const earlier = keys.get(key);
      if (earlier && now() - earlier.createdAtMs >= IDEMPOTENCY_TTL_MS) keys.delete(key);
      const live = keys.get(key);
      if (live) {
        if (live.fingerprint !== fingerprint) {
          return reply.code(400).send({
            error: 'IdempotentRequestError',
            description: "Request parameters don't match the given idempotency key",
          });
        }
        if (!live.response)
          return reply.code(409).send({
            error: 'IdempotentRequestInProgress',
            description: 'A request with this idempotency key is still being processed',
          });
        if (record) record.lookup = 'hit';
        return reply.code(live.response.status).header('x-idempotency-lookup', 'hit').send(live.response.body);
      }
      keys.set(key, { fingerprint, createdAtMs: now(), response: null });
    }
    const parsed = createSchema.safeParse(request.body);
    const description = parsed.success
      ? (parsed.data.ticket.comment?.body ?? parsed.data.ticket.comment?.html_body ?? parsed.data.ticket.description)
      : undefined;
    if (!parsed.success || !description) {
      if (key !== null) keys.delete(key); // nothing was done: the corrected request may use the key
      return reply.code(422).send({
        error: 'RecordInvalid',
        description: 'Record validation errors',
        details: { base: [{ description: 'Description: cannot be blank' }] },
      });
    }
    const id = tickets.length + 1;
    const at = new Date(now()).toISOString();
    const ticket: HelpdeskTicket = {
      id,
      url: `${request.protocol}://${request.host}/api/v2/tickets/${id}.json`,
      external_id: parsed.data.ticket.external_id ?? null,
      subject: parsed.data.ticket.subject ?? null,
      description,
      status: 'new',
      tags: parsed.data.ticket.tags ?? [],
      created_at: at,
      updated_at: at,
    };
    tickets.push(ticket);
    const comment = parsed.data.ticket.comment;
    const audit: HelpdeskAudit = {
      id: 1000 + audits.length + 1,
      ticket_id: id,
      created_at: at,
      events: [
        { id: nextEventId++, type: 'Create' },
        {
          id: nextEventId++,
          type: 'Comment',
          body: description,
          plain_body: description,
          public: comment?.public ?? true,
          created_at: at,
        },
      ],
    };
    audits.push(audit);
    const body = { ticket, audit };
    if (key !== null) {
      keys.get(key)!.response = { status: 201, body };
      if (record) record.lookup = 'miss';
      void reply.header('x-idempotency-lookup', 'miss');
    }
    return reply.code(201).send(body);
  };
  app.post('/api/v2/tickets', createTicket);
  app.post('/api/v2/tickets.json', createTicket);

  const listTickets = async (request: FastifyRequest<{ Querystring: { external_id?: string } }>) => {
    const { external_id } = request.query;
    const found = external_id === undefined ? tickets : tickets.filter((t) => t.external_id === external_id);
    return { tickets: found, next_page: null, previous_page: null, count: found.length };
  };
  app.get('/api/v2/tickets', listTickets);
  app.get('/api/v2/tickets.json', listTickets);
  app.get<{ Params: { id: string } }>('/api/v2/tickets/:id', async (request, reply) => {
    const ticket = tickets.find((t) => String(t.id) === request.params.id.replace(/\.json$/, ''));
    return ticket ? { ticket } : reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
  });

  const ticketOf = (id: string) => tickets.find((t) => String(t.id) === id.replace(/\.json$/, ''));
  const updateTicket = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const ticket = ticketOf(request.params.id);
    if (!ticket) return reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
    const parsed = updateSchema.safeParse(request.body);
    if (!parsed.success) return reply.code(400).send({ error: 'InvalidRequest', description: parsed.error.message });
    if (ticket.status === 'closed')
      return reply.code(422).send({
        error: 'RecordInvalid',
        description: 'Record validation errors',
        details: { status: [{ description: 'Status: closed prevents ticket update' }] },
      });
    const at = new Date(now()).toISOString();
    const audit: HelpdeskAudit = { id: 1000 + audits.length + 1, ticket_id: ticket.id, created_at: at, events: [] };
    const { comment, status } = parsed.data.ticket;
    const text = comment?.body ?? comment?.html_body;
    if (text !== undefined)
      audit.events.push({
        id: nextEventId++,
        type: 'Comment',
        body: text,
        plain_body: text,
        public: comment?.public ?? true,
        created_at: at,
      });
    if (status !== undefined && status !== ticket.status) {
      audit.events.push({ id: nextEventId++, type: 'Change', field_name: 'status', value: status });
      ticket.status = status === 'hold' ? 'pending' : status;
    }
    ticket.updated_at = at;
    if (audit.events.length > 0) audits.push(audit);
    return { ticket, audit };
  };
  app.put('/api/v2/tickets/:id', updateTicket);
  // Zendesk's deletion: a deleted ticket leaves the list (kept 30 days among deleted_tickets),
  // and `DELETE /api/v2/deleted_tickets/{id}` removes it and its audits for good.
  const deleted: HelpdeskTicket[] = [];
  app.delete<{ Params: { id: string } }>('/api/v2/tickets/:id', async (request, reply) => {
    const ticket = ticketOf(request.params.id);
    if (!ticket) return reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
    tickets.splice(tickets.indexOf(ticket), 1);
    deleted.push(ticket);
    return reply.code(204).send();
  });
  app.delete<{ Params: { id: string } }>('/api/v2/deleted_tickets/:id', async (request, reply) => {
    const ticket = deleted.find((t) => String(t.id) === request.params.id.replace(/\.json$/, ''));
    if (!ticket) return reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
    deleted.splice(deleted.indexOf(ticket), 1);
    for (let i = audits.length - 1; i >= 0; i--) if (audits[i]!.ticket_id === ticket.id) audits.splice(i, 1);
    return reply.code(200).send({ job_status: { id: `delete-${ticket.id}`, status: 'completed' } });
  });
  const auditsOf = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const ticket = ticketOf(request.params.id);
    if (!ticket) return reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
    const found = audits.filter((a) => a.ticket_id === ticket.id);
    return { audits: found, next_page: null, previous_page: null, count: found.length };
  };
  app.get('/api/v2/tickets/:id/audits', auditsOf);
  app.get('/api/v2/tickets/:id/audits.json', auditsOf);
  const commentsOf = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const ticket = ticketOf(request.params.id);
    if (!ticket) return reply.code(404).send({ error: 'RecordNotFound', description: 'Not found' });
    const comments = audits
      .filter((a) => a.ticket_id === ticket.id)
      .flatMap((a) => a.events.filter((e): e is HelpdeskComment => e.type === 'Comment'));
    return { comments, next_page: null, previous_page: null, count: comments.length };
  };
  app.get('/api/v2/tickets/:id/comments', commentsOf);
  app.get('/api/v2/tickets/:id/comments.json', commentsOf);

  // Control (/_helpdesk): inspect, arm faults, move the clock. No auth: loopback only.
  app.get('/_helpdesk/tickets', async () => ({ count: tickets.length, tickets }));
  app.get('/_helpdesk/requests', async () => ({ count: requests.length, requests }));
  app.post('/_helpdesk/faults', async (request, reply) => {
    const parsed = z.object({ rules: z.array(helpdeskFaultSchema) }).safeParse(request.body);
    if (!parsed.success) return reply.code(400).send({ error: parsed.error.message });
    return { rules: faults.set(parsed.data.rules) };
  });
  app.delete('/_helpdesk/faults', async () => {
    faults.clear();
    return { rules: [] };
  });
  app.post('/_helpdesk/clock/advance', async (request) => {
    const { ms } = z.object({ ms: z.number().int().min(0) }).parse(request.body);
    clockOffsetMs += ms;
    return { offset_ms: clockOffsetMs };
  });
  app.get<{ Params: { id: string } }>('/_helpdesk/tickets/:id/audits', async (request) => ({
    audits: audits.filter((a) => String(a.ticket_id) === request.params.id),
  }));
  app.post<{ Params: { id: string } }>('/_helpdesk/tickets/:id/status', async (request, reply) => {
    const ticket = ticketOf(request.params.id);
    const { status } = z.object({ status: z.enum(['new', 'open', 'pending', 'solved', 'closed']) }).parse(request.body);
    if (!ticket) return reply.code(404).send({ error: 'no such ticket' });
    ticket.status = status;
    return { ticket };
  });
  app.post('/_helpdesk/reset', async () => {
    tickets.length = 0;
    audits.length = 0;
    requests.length = 0;
    keys.clear();
    faults.clear();
    clockOffsetMs = 0;
    return { ok: true };
  });

  return { app, tickets, audits, requests };
}

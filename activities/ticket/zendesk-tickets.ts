import { createHmac } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { providerIdempotencyKey } from '../../lib/hashing';
import { FailureType, RetryableFailureType } from '../../contract';
import { retryAfterMs } from '../failures/retry-after';
import type { CommentRequest, TicketAttempt, TicketProvider, TicketRequest } from './ticket-provider';

/**
 * Tickets in Zendesk Support, through its documented REST API (developer.zendesk.com, Tickets).
 * Plain fetch: node-zendesk is a community client that sets headers per client, not per request,
 * and hides status codes, and Zendesk publishes no Node SDK of its own.
 *
 * Two defences against a second ticket, both derived from our operation key (never random):
 *  - `Idempotency-Key` on the create: within Zendesk's 2-hour window a repeated create returns
 *    the original ticket (`x-idempotency-lookup: hit`); the same key with another body is a 400.
 *  - `external_id`: a resumed attempt (an earlier one may have created the ticket and crashed or
 *    lost the response) first lists tickets by external id, which outlives the key's window.
 *
 * Comments (a later message, our reply, a skip's reason) are added by updating the ticket
 * (`PUT /api/v2/tickets/{id}` with `ticket.comment`), which takes no idempotency key. So each
 * comment carries a marker derived from its operation key, and a resumed attempt first reads the
 * ticket's audits (`GET /api/v2/tickets/{id}/audits`) for a comment with that marker. The marker
 * is an HMAC of the key under ZENDESK_MARKER_SECRET: the key is made of ids a sender knows (their
 * own Message-ID), so a plain hash of it could be written into their message — whose comment would
 * then "find" the marker and make a resumed attempt skip the real comment.
 */

export interface ZendeskSettings {
  /** https://<subdomain>.zendesk.com */
  url: string;
  email: string;
  apiToken: string;
  /** ZENDESK_MARKER_SECRET: the key of the comment markers' HMAC (the worker's config requires it; `npm run forget` adds no comment). */
  markerSecret?: string | undefined;
  /** One request's deadline. */
  timeoutMs: number;
  /** Tags put on every ticket. */
  tags?: string[];
}

interface ZendeskTicket {
  id: number;
  external_id: string | null;
  created_at?: string;
}

export class ZendeskTickets implements TicketProvider {
  readonly name = 'zendesk';
  private readonly authorization: string;
  private readonly baseUrl: string;

  constructor(private readonly settings: ZendeskSettings) {
    this.authorization = `Basic ${Buffer.from(`${settings.email}/token:${settings.apiToken}`).toString('base64')}`;
    this.baseUrl = settings.url.replace(/\/+$/, '');
  }

  async create(request: TicketRequest, attempt: TicketAttempt): Promise<{ ticketId: string }> {
    // Zendesk's limit is 255 characters; an operation key can be longer, its hash cannot.
    const key = providerIdempotencyKey(request.externalId);
    if (attempt.resumed) {
      const existing = await this.findByExternalId(key, attempt.signal);
      if (existing) return { ticketId: String(existing.id) };
    }
    const body = { ticket: this.ticketFields(request, key) };
    const response = await this.call('POST', '/api/v2/tickets.json', {
      body,
      idempotencyKey: key,
      signal: attempt.signal,
      what: `creating the ticket for ${request.externalId}`,
    });
    const created = (await response.json()) as { ticket?: ZendeskTicket };
    if (typeof created.ticket?.id !== 'number') {
      throw ApplicationFailure.create({
        type: RetryableFailureType.TicketOutcomeUnknown,
        message: `Zendesk answered ${response.status} without a ticket id for ${request.externalId}`,
        nonRetryable: false,
      });
    }
    return { ticketId: String(created.ticket.id) };
  }

  async addComment(request: CommentRequest, attempt: TicketAttempt): Promise<{ commentId: string }> {
    if (!this.settings.markerSecret)
      throw ApplicationFailure.create({
        type: FailureType.TicketRejected,
        message: 'adding a Zendesk comment needs ZENDESK_MARKER_SECRET (the key of the comment markers)',
        nonRetryable: true,
      });
    const marker = commentMarker(request.externalId, this.settings.markerSecret);
    if (attempt.resumed) {
      const found = await this.findComment(request.ticketId, marker, attempt.signal);
      if (found !== undefined) return { commentId: found };
    }
    const ticket: Record<string, unknown> = {
      comment: { body: `${request.body.trim() || '(no text)'}\n\n${marker}`, public: request.public },
    };
    // Zendesk: a solved (or pending, on-hold) ticket goes back to open with the customer's new message.
    if (request.reopen) ticket.status = 'open';
    const response = await this.call('PUT', `/api/v2/tickets/${encodeURIComponent(request.ticketId)}.json`, {
      body: { ticket },
      signal: attempt.signal,
      what: `adding the comment ${request.externalId} to ticket ${request.ticketId}`,
    });
    const updated = (await response.json()) as { audit?: { id?: number } };
    return { commentId: String(updated.audit?.id ?? marker) };
  }

  /** The audit that added the comment carrying `marker`, if any (every page of the ticket's audits). */
  async findComment(ticketId: string, marker: string, signal?: AbortSignal): Promise<string | undefined> {
    let path: string | null = `/api/v2/tickets/${encodeURIComponent(ticketId)}/audits.json`;
    for (let page = 0; path !== null && page < MAX_AUDIT_PAGES; page++) {
      const response = await this.call('GET', path, { signal, what: `reading the audits of ticket ${ticketId}` });
      const body = (await response.json()) as { audits?: ZendeskAudit[]; next_page?: string | null };
      for (const audit of body.audits ?? [])
        for (const event of audit.events ?? [])
          if (event.type === 'Comment' && [event.body, event.plain_body].some((text) => text?.includes(marker)))
            return String(audit.id);
      path = body.next_page ? pathOf(body.next_page, this.baseUrl) : null;
    }
    return undefined;
  }

  /** The oldest ticket carrying this external id (Zendesk does not make external ids unique). */
  async findByExternalId(externalId: string, signal?: AbortSignal): Promise<ZendeskTicket | undefined> {
    const response = await this.call('GET', `/api/v2/tickets.json?external_id=${encodeURIComponent(externalId)}`, {
      signal,
      what: `looking up the ticket with external id ${externalId}`,
    });
    const { tickets = [] } = (await response.json()) as { tickets?: ZendeskTicket[] };
    return tickets.filter((t) => t.external_id === externalId).sort((a, b) => a.id - b.id)[0];
  }

  /** Everything here comes from the stored message and our key, so every attempt sends the same body. */
  private ticketFields(request: TicketRequest, key: string) {
    const description = request.message
      ? [
          request.note,
          '',
          `From: ${request.message.from}`,
          `Subject: ${request.subject}`,
          `Received: ${request.message.receivedAt}`,
          `AgentMail inbox ${request.inboxId}, message ${request.messageId}, thread ${request.threadId}`,
          '',
          request.message.text.trim() || '(no text)',
        ].join('\n')
      : [
          request.note,
          '',
          `AgentMail inbox ${request.inboxId}, thread ${request.threadId}`,
          'Each message of the conversation, and each reply, follows as a comment.',
        ].join('\n');
    return {
      subject: request.subject,
      comment: { body: description },
      external_id: key,
      tags: this.settings.tags ?? ['replyonce'],
    };
  }

  /**
   * Erasure (privacy/erase.ts): deletes the ticket (Zendesk keeps a deleted ticket 30 days), then
   * deletes it permanently (`DELETE /api/v2/deleted_tickets/{id}`). `gone`: Zendesk has neither.
   * Errors name the status only, never a body.
   */
  async deleteTicket(ticketId: string): Promise<'deleted' | 'gone'> {
    const id = encodeURIComponent(ticketId);
    const soft = await this.deleteStatus(`/api/v2/tickets/${id}.json`);
    const hard = await this.deleteStatus(`/api/v2/deleted_tickets/${id}.json`);
    const bad = [soft, hard].find((status) => status >= 300 && status !== 404);
    if (bad !== undefined) throw new Error(`Zendesk answered ${bad} deleting ticket ${ticketId}`);
    return soft === 404 && hard === 404 ? 'gone' : 'deleted';
  }

  private async deleteStatus(path: string): Promise<number> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method: 'DELETE',
      headers: { authorization: this.authorization, accept: 'application/json' },
      signal: AbortSignal.timeout(this.settings.timeoutMs),
    });
    await response.body?.cancel();
    return response.status;
  }

  private async call(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    options: { body?: unknown; idempotencyKey?: string; signal?: AbortSignal | undefined; what: string },
  ): Promise<Response> {
    const deadline = AbortSignal.timeout(this.settings.timeoutMs);
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: this.authorization,
          accept: 'application/json',
          ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
        },
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
        signal: options.signal ? AbortSignal.any([deadline, options.signal]) : deadline,
      });
    } catch (error) {
      if (options.signal?.aborted) throw error; // the activity was cancelled: not ours to classify
      const reason = deadline.aborted
        ? `no answer within ZENDESK_TIMEOUT_MS=${this.settings.timeoutMs} ms`
        : errorText(error);
      throw ApplicationFailure.create({
        type: unknownOutcome(method),
        message: `${options.what}: ${reason}; retrying`,
        nonRetryable: false,
      });
    }
    if (response.ok) return response;
    throw await zendeskFailure(response, method, options.what);
  }
}

/** Zendesk's answers, as failures a person can search for; only what retrying cannot fix is final. */
async function zendeskFailure(
  response: Response,
  method: 'GET' | 'POST' | 'PUT',
  what: string,
): Promise<ApplicationFailure> {
  const status = response.status;
  const body = (await response.json().catch(() => ({}))) as { error?: unknown; description?: unknown };
  const detail =
    [body.error, body.description].filter((part) => typeof part === 'string').join(': ') || response.statusText;
  const retryable = (type: string, message: string, nextRetryDelay?: number) =>
    ApplicationFailure.create({
      type,
      message,
      nonRetryable: false,
      ...(nextRetryDelay !== undefined ? { nextRetryDelay } : {}),
    });
  const wait = retryAfterMs(response.headers);
  if (status === 429)
    return retryable(
      'HelpdeskRateLimited',
      `${what}: Zendesk is rate-limiting us (429)${wait !== undefined ? `; retrying after ${wait} ms as it asked` : ''}`,
      wait,
    );
  if (status >= 500)
    return retryable(unknownOutcome(method), `${what}: Zendesk answered ${status} (${detail}); retrying`, wait);
  if (status === 409)
    return retryable('TicketInProgress', `${what}: Zendesk is still processing a request with this key (409)`, wait);
  if (status === 401 || status === 403)
    return retryable(
      'HelpdeskUnauthorized',
      `${what}: Zendesk rejected our credentials (${status}): check ZENDESK_EMAIL and ZENDESK_API_TOKEN`,
    );
  if (status === 404) return retryable('HelpdeskNotFound', `${what}: Zendesk answered 404: check ZENDESK_URL`);
  if (status === 400 && body.error === 'IdempotentRequestError') {
    return ApplicationFailure.create({
      type: FailureType.TicketConflict,
      message: `${what}: Zendesk refused the key, used before with a different request (${detail})`,
      nonRetryable: true,
    });
  }
  return ApplicationFailure.create({
    type: FailureType.TicketRejected,
    message: `${what}: Zendesk rejected the ticket (${status}: ${detail})`,
    nonRetryable: true,
  });
}

/** A create whose answer was lost may have happened (the retry's key and look-up settle it); a read did nothing. */
const unknownOutcome = (method: 'GET' | 'POST' | 'PUT') =>
  method === 'GET' ? 'HelpdeskUnavailable' : 'TicketOutcomeUnknown';

interface ZendeskAudit {
  id: number;
  events?: Array<{ type?: string; body?: string; plain_body?: string }>;
}

/** A long conversation's audits span pages; a comment older than this many pages is not looked for. */
const MAX_AUDIT_PAGES = 20;

/**
 * Put in the comment's text: an HMAC-SHA256 of the operation key under the deployment's secret
 * (fixed length whatever the key's; nobody without the secret can compute one).
 */
export const commentMarker = (operationKey: string, secret: string): string =>
  `[ref:${createHmac('sha256', secret).update(operationKey, 'utf8').digest('hex')}]`;

/** Zendesk's next_page is an absolute URL on the same host; followed as a path on ours only. */
function pathOf(nextPage: string, baseUrl: string): string | null {
  const next = new URL(nextPage, baseUrl);
  return next.origin === new URL(baseUrl).origin ? `${next.pathname}${next.search}` : null;
}

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${error.message}${cause}`;
}

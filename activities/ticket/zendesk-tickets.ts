import { ApplicationFailure } from '@temporalio/common';
import { providerIdempotencyKey } from '../../lib/hashing';
import { FailureType, RetryableFailureType } from '../../contract';
import { retryAfterMs } from '../failures/retry-after';
import type { TicketAttempt, TicketProvider, TicketRequest } from './ticket-provider';

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
 */

export interface ZendeskSettings {
  /** https://<subdomain>.zendesk.com */
  url: string;
  email: string;
  apiToken: string;
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
    const description = [
      request.note,
      '',
      `From: ${request.message.from}`,
      `Subject: ${request.subject}`,
      `Received: ${request.message.receivedAt}`,
      `AgentMail inbox ${request.inboxId}, message ${request.messageId}, thread ${request.threadId}`,
      '',
      request.message.text.trim() || '(no text)',
    ].join('\n');
    return {
      subject: request.subject,
      comment: { body: description },
      external_id: key,
      tags: this.settings.tags ?? ['replyonce'],
    };
  }

  private async call(
    method: 'GET' | 'POST',
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
async function zendeskFailure(response: Response, method: 'GET' | 'POST', what: string): Promise<ApplicationFailure> {
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
const unknownOutcome = (method: 'GET' | 'POST') => (method === 'POST' ? 'TicketOutcomeUnknown' : 'HelpdeskUnavailable');

function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${error.message}${cause}`;
}

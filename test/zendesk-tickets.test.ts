import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { TicketRequest } from '../activities/ticket/ticket-provider';
import { commentMarker, ZendeskTickets } from '../activities/ticket/zendesk-tickets';
import { providerIdempotencyKey } from '../lib/hashing';
import { type MessageRef, threadTicketKey, ticketKey, ticketReplyKey } from '../contract';
import { loadWorkerConfig } from '../lib/config';
import { buildHelpdeskStandIn, IDEMPOTENCY_TTL_MS } from '../sandbox/helpdesk/app';
import { HelpdeskControl } from '../sandbox/helpdesk/control-client';
import { Harness } from './support/harness';

// Tickets in Zendesk, against a stand-in of its Tickets API that honours the documented
// idempotency rules: first the adapter alone, then the whole path with a lost response.
const EMAIL = 'replyonce-bot@example.com';
const TOKEN = 'zendesk-test-token';
const MARKER_SECRET = `marker-secret-${randomUUID()}`;
let helpdesk: HelpdeskControl;
let helpdeskUrl: string;
let closeHelpdesk: () => Promise<unknown>;
let h: Harness;

before(async () => {
  const standIn = buildHelpdeskStandIn({ email: EMAIL, apiToken: TOKEN });
  await standIn.app.listen({ port: 0, host: '127.0.0.1' });
  closeHelpdesk = () => standIn.app.close();
  helpdeskUrl = `http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}`;
  helpdesk = new HelpdeskControl(helpdeskUrl);
  h = await Harness.start({ tickets: zendesk() });
});
after(async () => {
  await h.close();
  await closeHelpdesk();
});

function zendesk(overrides: { apiToken?: string } = {}) {
  return new ZendeskTickets({
    url: helpdeskUrl,
    email: EMAIL,
    apiToken: overrides.apiToken ?? TOKEN,
    markerSecret: MARKER_SECRET,
    timeoutMs: 2_000,
  });
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

function ticketRequest(overrides: Partial<TicketRequest> = {}): TicketRequest {
  const messageId = `<${randomUUID()}@customer.example>`;
  return {
    externalId: ticketKey({ inboxId: 'support@example.com', messageId }),
    inboxId: 'support@example.com',
    messageId,
    threadId: randomUUID(),
    subject: 'Where is my order?',
    note: 'answered by the support agent',
    message: {
      from: 'ada@customer.example',
      text: 'I ordered a difference engine.',
      receivedAt: '2025-01-02T03:04:05.000Z',
    },
    ...overrides,
  };
}

async function failureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`);
    return error;
  }
  assert.fail('the call succeeded');
}

describe('the Zendesk adapter', () => {
  test('creates a ticket whose external id and Idempotency-Key derive from the operation key', async () => {
    const request = ticketRequest();
    const { ticketId } = await zendesk().create(request, { resumed: false });
    const key = providerIdempotencyKey(request.externalId);
    const [ticket] = await helpdesk.tickets({ external_id: key });
    assert.equal(String(ticket!.id), ticketId);
    assert.equal(ticket!.subject, 'Where is my order?');
    assert.match(ticket!.description, /I ordered a difference engine\./);
    assert.match(ticket!.description, /From: ada@customer\.example/);
    const creates = (await helpdesk.requests()).filter((r) => r.idempotency_key === key);
    assert.deepEqual(
      creates.map((r) => [r.method, r.lookup, r.status]),
      [['POST', 'miss', 201]],
    );
  });

  test("the same create again inside the key's 2 hours returns the same ticket (x-idempotency-lookup: hit)", async () => {
    const request = ticketRequest();
    const first = await zendesk().create(request, { resumed: false });
    const second = await zendesk().create(request, { resumed: false });
    const key = providerIdempotencyKey(request.externalId);
    assert.equal(second.ticketId, first.ticketId);
    assert.equal((await helpdesk.tickets({ external_id: key })).length, 1);
    assert.deepEqual(
      (await helpdesk.requests()).filter((r) => r.idempotency_key === key).map((r) => r.lookup),
      ['miss', 'hit'],
    );
  });

  test('a resumed attempt after the key expired finds the ticket by its external id and creates none', async () => {
    const request = ticketRequest();
    const first = await zendesk().create(request, { resumed: false });
    await helpdesk.advanceClock(IDEMPOTENCY_TTL_MS + 60_000);
    const before = (await helpdesk.requests()).length;
    const resumed = await zendesk().create(request, { resumed: true });
    assert.equal(resumed.ticketId, first.ticketId);
    const since = (await helpdesk.requests()).slice(before);
    assert.deepEqual(
      since.map((r) => r.method),
      ['GET'],
      'a look-up, no create',
    );
    assert.equal((await helpdesk.tickets({ external_id: providerIdempotencyKey(request.externalId) })).length, 1);
  });

  test("a customer who writes a comment's marker into their message (its key is made of ids they know) does not make a resumed attempt skip that comment", async () => {
    // Prepare: a ticket whose first comment is the customer's message, carrying the marker of our
    // reply's comment as a sender can compute it: from the operation key, which holds their own Message-ID.
    const request = ticketRequest();
    const { ticketId } = await zendesk().create(request, { resumed: false });
    const ref = { inboxId: request.inboxId, messageId: request.messageId };
    const replyComment = ticketReplyKey(ref);
    const computable = [`[ref:${providerIdempotencyKey(replyComment)}]`, `[ref:${sha256(replyComment)}]`];
    const forged = {
      externalId: ticketKey(ref),
      ticketId,
      kind: 'inbound' as const,
      messageId: ref.messageId,
      public: true,
      reopen: false,
    };
    await zendesk().addComment({ ...forged, body: `Hello. ${computable.join(' ')}` }, { resumed: false });
    // Act: our reply's comment, by an attempt that resumes (an earlier one may have added it).
    const reply = { ...forged, externalId: replyComment, kind: 'reply' as const, body: 'Our answer, once.' };
    await zendesk().addComment(reply, { resumed: true });
    // Assess: the reply is on the ticket; its marker is nothing the sender could have written.
    const comments = await helpdesk.comments(ticketId);
    assert.equal(comments.filter((c) => c.body.includes('Our answer, once.')).length, 1, 'the reply was added');
    const marker = commentMarker(replyComment, MARKER_SECRET);
    assert.ok(!computable.includes(marker));
    assert.notEqual(commentMarker(replyComment, `another-${MARKER_SECRET}`), marker, 'the secret decides the marker');
    assert.equal(comments.filter((c) => c.body.includes(marker)).length, 1);
  });

  test('TICKET_PROVIDER=zendesk without ZENDESK_MARKER_SECRET stops the worker at start-up, naming it', () => {
    const env = {
      DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
      AGENTMAIL_API_KEY: 'am_test',
      TICKET_PROVIDER: 'zendesk',
      ZENDESK_URL: helpdeskUrl,
      ZENDESK_EMAIL: EMAIL,
      ZENDESK_API_TOKEN: TOKEN,
    };
    assert.throws(() => loadWorkerConfig(env), /ZENDESK_MARKER_SECRET is required when TICKET_PROVIDER=zendesk/);
    assert.throws(
      () => loadWorkerConfig({ ...env, ZENDESK_MARKER_SECRET: 'short' }),
      /ZENDESK_MARKER_SECRET must be at least 32/,
    );
    assert.equal(
      loadWorkerConfig({ ...env, ZENDESK_MARKER_SECRET: MARKER_SECRET }).ZENDESK_MARKER_SECRET,
      MARKER_SECRET,
    );
  });

  test('the key reused with a different body → TicketConflict, final', async () => {
    const request = ticketRequest();
    await zendesk().create(request, { resumed: false });
    const failure = await failureOf(zendesk().create({ ...request, note: 'something else' }, { resumed: false }));
    assert.equal(failure.type, 'TicketConflict');
    assert.equal(failure.nonRetryable, true);
  });

  const answers: Array<[string, Parameters<HelpdeskControl['setFaults']>[0], string, boolean]> = [
    ['a 429 with Retry-After', { action: 'rate-limit', retry_after_seconds: 4 }, 'HelpdeskRateLimited', false],
    ['a 500', { action: 'status', status: 500 }, 'TicketOutcomeUnknown', false],
    ['a connection dropped after the create', { action: 'drop-after-commit' }, 'TicketOutcomeUnknown', false],
    ['a 422', { action: 'status', status: 422 }, 'TicketRejected', true],
  ];
  for (const [name, fault, type, nonRetryable] of answers) {
    test(`${name} → ${type}, ${nonRetryable ? 'final' : 'retried'}`, async () => {
      await helpdesk.setFaults({ match: { method: 'POST' }, count: 1, ...fault });
      try {
        const failure = await failureOf(zendesk().create(ticketRequest(), { resumed: false }));
        assert.equal(failure.type, type);
        assert.equal(failure.nonRetryable, nonRetryable);
        if (type === 'HelpdeskRateLimited') assert.equal(failure.nextRetryDelay, 4_000);
      } finally {
        await helpdesk.clearFaults();
      }
    });
  }

  test('a wrong API token → HelpdeskUnauthorized, retried, naming the variables (not the token)', async () => {
    const failure = await failureOf(zendesk({ apiToken: 'wrong-token' }).create(ticketRequest(), { resumed: false }));
    assert.equal(failure.type, 'HelpdeskUnauthorized');
    assert.equal(failure.nonRetryable, false);
    assert.match(failure.message, /ZENDESK_EMAIL and ZENDESK_API_TOKEN/);
    assert.ok(!failure.message.includes('wrong-token'));
  });
});

describe('tickets in Zendesk, end to end', () => {
  async function newMessage(thread?: { inboxId: string; threadId: string }) {
    const inboxId = thread?.inboxId ?? h.newInbox();
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      ...(thread ? { thread_id: thread.threadId } : {}),
      from: `ada-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Where is my order?',
      text: `Please answer once. ${randomUUID()}`,
    });
    const ref: MessageRef = { inboxId, messageId: inbound.message.message_id };
    return { ref, threadId: inbound.message.thread_id, text: inbound.message.text ?? '' };
  }
  const threadKeyOf = (ref: MessageRef, threadId: string) =>
    providerIdempotencyKey(threadTicketKey(ref.inboxId, threadId));

  test('an answered message gets one Zendesk ticket for its thread, whose id the workflow returns; the message and our reply are comments on it', async () => {
    const { ref, threadId, text } = await newMessage();
    const result = await h.resultOf(ref);
    const tickets = await helpdesk.tickets({ external_id: threadKeyOf(ref, threadId) });
    assert.equal(tickets.length, 1);
    assert.equal(result.status === 'sent' && result.ticketId, String(tickets[0]!.id));
    const comments = await helpdesk.comments(tickets[0]!.id);
    assert.equal(comments.filter((c) => c.body.includes(text)).length, 1, 'the message, once');
    const [sent] = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(
      comments.filter((c) => c.public && c.body.includes(sent!.message.text ?? '')).length,
      1,
      'our reply, public',
    );
    assert.equal((await h.ticketsFor(ref)).length, 0, 'nothing in the Postgres ticket table');
  });

  test("the first create's response is lost after Zendesk committed it → the retry finds it by external id: one ticket", async () => {
    // Prepare: the stand-in creates the ticket, then drops the connection instead of answering.
    await helpdesk.setFaults({
      match: { method: 'POST', path: '/api/v2/tickets' },
      count: 1,
      action: 'drop-after-commit',
    });
    try {
      const before = (await helpdesk.requests()).length;
      const { ref, threadId } = await newMessage();
      // Act
      const result = await h.resultOf(ref);
      // Assess
      const key = threadKeyOf(ref, threadId);
      const tickets = await helpdesk.tickets({ external_id: key });
      assert.equal(tickets.length, 1, 'one ticket at Zendesk');
      assert.equal(result.status === 'sent' && result.ticketId, String(tickets[0]!.id));
      const since = (await helpdesk.requests()).slice(before).filter((r) => r.path.startsWith('/api/v2/tickets.json'));
      assert.deepEqual(
        since.map((r) => [r.method, r.url, r.status]),
        [
          ['POST', '/api/v2/tickets.json', null],
          ['GET', `/api/v2/tickets.json?external_id=${key}`, 200],
        ],
        'the create (its answer lost), then the look-up by external id; no second create',
      );
      const row = (
        await h.db.query<{ status: string; attempts: number }>(
          'SELECT status, attempts FROM operations WHERE operation_key = $1',
          [threadTicketKey(ref.inboxId, threadId)],
        )
      ).rows[0];
      assert.deepEqual(row, { status: 'complete', attempts: 2 });
    } finally {
      await helpdesk.clearFaults();
    }
  });

  test("a comment's response is lost after Zendesk added it → the retry finds its marker in the ticket's audits: one comment", async () => {
    // Prepare: the first update (the message's comment) is done, then its answer dropped
    await helpdesk.setFaults({
      match: { method: 'PUT', path: '/api/v2/tickets/' },
      count: 1,
      action: 'drop-after-commit',
    });
    try {
      const before = (await helpdesk.requests()).length;
      const { ref, text } = await newMessage();
      // Act
      const result = await h.resultOf(ref);
      // Assess
      assert.equal(result.status, 'sent');
      const ticketId = result.status === 'sent' ? result.ticketId! : '';
      const comments = await helpdesk.comments(ticketId);
      assert.equal(comments.filter((c) => c.body.includes(text)).length, 1, 'the message once on the ticket');
      assert.equal(comments.filter((c) => c.body.includes(commentMarker(ticketKey(ref), MARKER_SECRET))).length, 1);
      const since = (await helpdesk.requests())
        .slice(before)
        .filter((r) => r.path.startsWith(`/api/v2/tickets/${ticketId}`));
      assert.deepEqual(
        since.map((r) => [r.method, r.path.replace(`/${ticketId}`, '/{id}'), r.status]),
        [
          ['PUT', '/api/v2/tickets/{id}.json', null],
          ['GET', '/api/v2/tickets/{id}/audits.json', 200],
          ['PUT', '/api/v2/tickets/{id}.json', 200],
        ],
        "the comment (its answer lost), the look-up that found it, then our reply's comment: no second PUT of the message",
      );
    } finally {
      await helpdesk.clearFaults();
    }
  });

  test('a follow-up after a person solved the ticket reopens it (status open), on the same ticket', async () => {
    // Prepare: answered, then solved by a person
    const first = await newMessage();
    const answered = await h.resultOf(first.ref);
    const ticketId = answered.status === 'sent' ? answered.ticketId! : '';
    await helpdesk.setStatus(ticketId, 'solved');
    // Act: the customer writes again in the thread
    const second = await newMessage({ inboxId: first.ref.inboxId, threadId: first.threadId });
    const result = await h.resultOf(second.ref);
    // Assess
    assert.equal(result.status === 'sent' && result.ticketId, ticketId, 'the same ticket');
    assert.equal((await helpdesk.tickets({ external_id: threadKeyOf(first.ref, first.threadId) })).length, 1);
    const [ticket] = (await helpdesk.tickets()).filter((t) => String(t.id) === ticketId);
    assert.equal(ticket?.status, 'open');
    assert.equal((await helpdesk.comments(ticketId)).filter((c) => c.body.includes(second.text)).length, 1);
  });
});

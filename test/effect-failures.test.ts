import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { AgentMailError, AgentMailTimeoutError } from 'agentmail';
import { runOperation } from '../activities/operation-store/run-operation';
import { providerFailure } from '../activities/agentmail/failures';
import { OperationStore } from '../activities/operation-store/store';
import type { TicketProvider, TicketRequest } from '../activities/ticket/ticket-provider';
import type { Db } from '../lib/db';
import { replyKey, ticketKey } from '../contract';
import { providerErrorText } from '../lib/provider-errors';
import { Harness } from './support/harness';
import { historyText } from './support/history';
import { failureChain, inboundWorkflow, replyStatus, within } from './support/workflow-watch';

// What cannot pass by retrying ends the run, typed and visible; and what a provider answered
// reaches history as its status and name, never its body.
const ADMIN_TOKEN = `admin-${randomUUID()}`;

/** A help desk whose create breaks a real Postgres CHECK (tickets.status): an error no retry can fix. */
class ConstraintBreakingTickets implements TicketProvider {
  readonly name = 'constraint-breaking';
  calls = 0;
  constructor(private readonly db: Db) {}
  async create(request: TicketRequest): Promise<{ ticketId: string }> {
    this.calls += 1;
    await this.db.query(
      `INSERT INTO tickets (ticket_id, operation_key, inbox_id, message_id, status) VALUES ($1, $2, $3, $4, 'lost')`,
      [`T-${randomUUID()}`, request.externalId, request.inboxId, request.messageId],
    );
    return { ticketId: 'never' };
  }
  async addComment(): Promise<{ commentId: string }> {
    return { commentId: 'never' };
  }
}

let h: Harness;
let tickets: ConstraintBreakingTickets | undefined;
before(async () => {
  h = await Harness.start({
    adminToken: ADMIN_TOKEN,
    tickets: {
      name: 'by-inbox',
      // Only the inboxes named "broken-desk-…" go to the breaking help desk.
      create: (request, attempt) =>
        request.inboxId.startsWith('broken-desk-')
          ? tickets!.create(request)
          : Promise.resolve({ ticketId: `T-ok-${attempt.resumed ? 'r' : 'f'}` }),
      addComment: () => Promise.resolve({ commentId: 'C-ok' }),
    },
  });
  tickets = new ConstraintBreakingTickets(h.db);
});
after(() => h.close());

const customerMail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Grace Hopper <grace-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'A moth in relay 70',
  text: 'Panel F. Please advise.',
});

/** A message arrives in `inboxId`; resolves with the failure its workflow ends with, failing the test if it lingers. */
async function messageFailing(inboxId: string, suspicion: string) {
  const inbound = await h.sandbox.inbound(customerMail(inboxId));
  const ref = { inboxId, messageId: inbound.message.message_id };
  const handle = await inboundWorkflow(h, ref);
  const error = await within(
    15_000,
    handle.result().then(
      () => assert.fail('the workflow completed'),
      (e: unknown) => e,
    ),
    `the workflow (${suspicion})`,
  );
  return { ref, handle, error };
}

const environment = () => new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
const isDatabaseRejected = (error: unknown) =>
  error instanceof ApplicationFailure && error.type === 'DatabaseRejected' && error.nonRetryable;

describe('Postgres constraint and data errors (SQLSTATE 22xxx, 23xxx) are final: DatabaseRejected', () => {
  test('a key the operations CHECK refuses fails the claim at once, naming the constraint, not the value', async () => {
    // Prepare: a key past operation_key's 1000 characters (contract/keys.ts never makes one)
    const store = new OperationStore(h.db);
    const key = `test/${'k'.repeat(1000)}/reply/v1`;
    let ran = false;

    // Act
    const failure = await environment()
      .run(() => runOperation(store, { key, kind: 'reply', request: {}, leaseMs: 5_000 }, async () => (ran = true)))
      .catch((error: unknown) => error);

    // Assess
    assert.ok(isDatabaseRejected(failure), String(failure));
    assert.match(
      (failure as Error).message,
      /SQLSTATE 23514 check_violation \(constraint operations_operation_key_check/,
    );
    assert.ok(!(failure as Error).message.includes('kkkk'), 'the rejected value is not repeated');
    assert.equal(ran, false);
  });

  test('an effect called without its key (a task from an older workflow version) is refused by name, before Postgres', async () => {
    const store = new OperationStore(h.db);
    const failure = await environment()
      .run(() =>
        runOperation(
          store,
          { key: undefined as unknown as string, kind: 'draft', request: {}, leaseMs: 5_000 },
          async () => 1,
        ),
      )
      .catch((error: unknown) => error);
    assert.ok(failure instanceof ApplicationFailure && failure.type === 'OperationKeyMissing' && failure.nonRetryable);
  });

  test('a result Postgres cannot store (U+0000 in jsonb) fails the operation for good: stored as failed, never run again', async () => {
    // Prepare
    const store = new OperationStore(h.db);
    const key = `test/${randomUUID()}/draft/v1`;
    let runs = 0;
    const run = () =>
      environment().run(() =>
        runOperation(store, { key, kind: 'draft', request: {}, leaseMs: 5_000 }, async () => {
          runs += 1;
          return { text: 'a\u0000b' };
        }),
      );

    // Act
    const first = await run().catch((error: unknown) => error);
    const second = await run().catch((error: unknown) => error);

    // Assess
    assert.ok(isDatabaseRejected(first), String(first));
    assert.match((first as Error).message, /SQLSTATE 22P05 untranslatable_character/);
    assert.ok(isDatabaseRejected(second), 'the stored failure is replayed with its type');
    assert.equal(runs, 1, 'the effect ran once');
    assert.equal((await store.get(key))?.status, 'failed');
  });

  test('through the whole path: a help desk breaking a CHECK fails the message within seconds, typed, ReplyStatus=failed', async () => {
    // Prepare
    const inboxId = h.newInbox('broken-desk');
    // Act
    const { ref, handle, error } = await messageFailing(inboxId, 'a Postgres constraint error retried?');

    // Assess: the chain a person sees in the Web UI
    assert.deepEqual(failureChain(error), { activityType: 'openTicket', type: 'DatabaseRejected', nonRetryable: true });
    assert.deepEqual(await replyStatus(handle), ['failed']);
    assert.equal(tickets?.calls, 1, 'tried once, not retried');
    const row = await h.db.query<{ status: string; error: { type: string } }>(
      'SELECT status, error FROM operations WHERE operation_key = $1',
      [ticketKey(ref)],
    );
    assert.deepEqual([row.rows[0]?.status, row.rows[0]?.error.type], ['failed', 'DatabaseRejected']);
  });
});

describe('what AgentMail answered leaves as status and name, never its body', () => {
  const MARKER = 'BODY-MARKER-7f3a';
  const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

  test('a 422 whose body quotes the reply never reaches the workflow history; the failure says 422 and is final', async () => {
    // Prepare: AgentMail refuses the send with a body that echoes "what we sent"
    const inboxId = h.newInbox();
    await h.sandbox.setFaults({
      match: { method: 'POST', path: new RegExp(`^/v0/inboxes/${escapeRegExp(inboxId)}/messages/.+/reply$`) },
      action: 'status',
      status: 422,
      message: `recipient refused the text "${MARKER} Thank you for writing" to customer@example.com`,
    });
    try {
      // Act
      const { ref, handle, error } = await messageFailing(inboxId, 'a 422 retried?');

      // Assess
      assert.deepEqual(failureChain(error), {
        activityType: 'sendReply',
        type: 'AgentMailRejected',
        nonRetryable: true,
      });
      const history = await historyText(h.client, handle);
      assert.ok(history.payloads > 5, 'payloads were decoded');
      assert.match(history.text, /AgentMail answered 422/, 'the status is there, decoded: the search can find text');
      assert.ok(!history.text.includes(MARKER), 'the body is not in the history');
      assert.ok(!history.text.includes('Thank you for writing'), 'nor the drafted text');
      const stored = await h.db.query<{ error: { message: string } }>(
        'SELECT error FROM operations WHERE operation_key = $1',
        [replyKey(ref)],
      );
      assert.ok(!JSON.stringify(stored.rows[0]?.error).includes(MARKER), 'nor the stored failure');
    } finally {
      await h.sandbox.clearFaults();
    }
  });

  test('the classification: 401 and 429/5xx/timeouts retried (429 after its Retry-After), other 4xx final; never the body', () => {
    const answered = (statusCode: number, headers: Record<string, string> = {}) =>
      new AgentMailError({
        message: 'Error',
        statusCode,
        body: { name: 'ValidationError', message: `the text "${MARKER}" to ada@customer.example` },
        rawResponse: {
          headers: new Headers(headers),
          redirected: false,
          status: statusCode,
          statusText: '',
          type: 'basic',
          url: '',
        },
      });
    const cases: Array<[unknown, string, boolean]> = [
      [answered(401), 'AgentMailUnauthorized', false],
      [answered(429, { 'retry-after': '7' }), 'AgentMailUnavailable', false],
      [answered(503), 'AgentMailUnavailable', false],
      [new AgentMailTimeoutError('Timeout exceeded when calling GET /v0/inboxes'), 'AgentMailUnavailable', false],
      [answered(400), 'AgentMailRejected', true],
      [answered(403), 'AgentMailRejected', true],
      [answered(422), 'AgentMailRejected', true],
    ];
    for (const [error, type, nonRetryable] of cases) {
      const failure = providerFailure(error, 'reading a message');
      assert.deepEqual([failure.type, failure.nonRetryable], [type, nonRetryable], failure.message);
      assert.ok(!failure.message.includes(MARKER) && !failure.message.includes('@customer.example'), failure.message);
      assert.equal(failure.cause, undefined, 'the SDK error (its message holds the body) is not kept as a cause');
    }
    assert.equal(providerFailure(answered(429, { 'retry-after': '7' }), 'x').nextRetryDelay, 7_000);
    assert.equal(providerErrorText(answered(422)), 'AgentMail answered 422 AgentMailError (ValidationError)');
  });

  test('the admin replay answers an AgentMail 403 with its status and name, not its body', async () => {
    // Prepare
    const inboxId = h.newInbox();
    await h.sandbox.inbound(customerMail(inboxId));
    await h.sandbox.setFaults({
      match: { method: 'GET', path: `/inboxes/${inboxId}/messages` },
      action: 'status',
      status: 403,
      message: `forbidden for ${MARKER}`,
    });
    try {
      // Act
      const response = await fetch(`${h.apiUrl}/admin/replay`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
        body: JSON.stringify({ inbox_id: inboxId, since: '1h' }),
      });
      const answer = await response.text();

      // Assess
      assert.equal(response.status, 502);
      assert.match(answer, /AgentMail answered 403/);
      assert.ok(!answer.includes(MARKER), answer);
    } finally {
      await h.sandbox.clearFaults();
    }
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { DraftAnswer, Drafter, DraftRequest } from '../activities/draft/drafting/drafter';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { OwnAddresses } from '../activities/decide/own-addresses';
import { releaseReply, reserveReply, reservedFor, retakeReply } from '../activities/decide/reply-budget';
import { inboundWorkflowId } from '../lib/hashing';
import { FailureType, type InboundMessageResult, type MessageRef, reviewUpdate } from '../contract';
import * as metrics from '../lib/metrics';
import { SANDBOX_DOMAIN } from '../sandbox/mailbox';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';

// Issue 13, the decision side, through the real path: the sandbox delivers a signed webhook to the
// ingress, the workflow decides on the real Temporal server, and what we sent is read back from the
// sandbox's outbox (and the tickets from Postgres). Whoever writes to us never steers whom, how
// often or how much we write.

const BUDGET = 5;
const CEILING = 6;
const DAY = 24 * 60 * 60 * 1000;
/** An inbox known before the harness starts, so it can be configured to need approval. */
const APPROVAL_INBOX = `approval-${randomUUID().slice(0, 8)}@${SANDBOX_DOMAIN}`;

/** Refuses to draft messages that say so: a run that fails after its decision. */
class RefusingDrafter implements Drafter {
  readonly name = 'refusing-offline';
  private readonly inner = new OfflineDrafter();
  async draft(request: DraftRequest): Promise<DraftAnswer> {
    if (request.text.includes('PLEASE-REFUSE'))
      throw ApplicationFailure.create({ type: FailureType.DraftRefused, message: 'refused', nonRetryable: true });
    return this.inner.draft(request);
  }
}

let h: Harness;
before(async () => {
  h = await Harness.start({
    replyBudgetPerSender: BUDGET,
    replyCeilingPerInboxPerHour: CEILING,
    // Skipped messages get no ticket here, so a ticket proves a rule that always asks a person.
    ticketForSkipped: false,
    approvalInboxes: [APPROVAL_INBOX],
    drafter: new RefusingDrafter(),
  });
});
after(() => h.close());

const sender = (name = 'ada') => `${name}-${randomUUID().slice(0, 8)}@customer.example`;

async function arrive(inboxId: string, fields: Record<string, unknown> = {}) {
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `Ada Lovelace <${sender()}>`,
    subject: 'Where is my order?',
    text: 'I ordered a difference engine last week. Where is it?',
    ...fields,
  });
  const ref: MessageRef = { inboxId, messageId: inbound.message.message_id };
  return { inbound, ref };
}

async function answered(inboxId: string, fields: Record<string, unknown> = {}) {
  const { inbound, ref } = await arrive(inboxId, fields);
  return { inbound, ref, result: await h.resultOf(ref) };
}

const outbox = (inboxId: string) => h.sandbox.outbox({ inbox_id: inboxId });
const skipped = (reason: string): InboundMessageResult => ({ status: 'skipped', reason, ticketId: null });

describe('own addresses', () => {
  test('mail from another inbox of the organisation (its list on a later page) is not answered', async () => {
    // Prepare: our sibling inbox is the oldest of 120, so inboxes.list (newest first) has it on page 2.
    const sibling = `sibling-${randomUUID().slice(0, 8)}@${SANDBOX_DOMAIN}`;
    await h.sandbox.createInbox(sibling);
    for (let i = 0; i < 119; i += 1)
      await h.sandbox.createInbox(`filler-${i}-${randomUUID().slice(0, 6)}@${SANDBOX_DOMAIN}`);
    const inboxId = h.newInbox();
    // Act: the sibling writes, once plainly and once with a display name and different case.
    const plain = await answered(inboxId, { from: sibling });
    const dressed = await answered(inboxId, { from: `Our Sibling <${sibling.toUpperCase()}>` });
    // Assess
    assert.deepEqual(plain.result, skipped('from-own-inbox'));
    assert.deepEqual(dressed.result, skipped('from-own-inbox'));
    assert.equal((await outbox(inboxId)).length, 0);
  });

  test('and the other way round: the first inbox writes to the second, which is not answered either', async () => {
    const first = h.newInbox('sales');
    const second = h.newInbox('billing');
    await h.sandbox.createInbox(first);
    const { result } = await answered(second, { from: first });
    assert.deepEqual(result, skipped('from-own-inbox'));
    assert.equal((await outbox(second)).length, 0);
  });

  test('a Reply-To naming one of our inboxes is no recipient: not answered', async () => {
    const inboxId = h.newInbox();
    const ours = h.newInbox('other');
    await h.sandbox.createInbox(ours);
    // A sender in our own domain, pointing the reply at a sibling inbox.
    const { result } = await answered(inboxId, { from: `colleague@${SANDBOX_DOMAIN}`, reply_to: [ours] });
    assert.deepEqual(result, skipped('no-valid-recipient'));
    assert.equal((await outbox(inboxId)).length, 0);
  });
});

describe('the cached list of our inboxes', () => {
  test('is refreshed on its schedule and for an unknown receiving inbox, one listing for concurrent callers; a failed refresh keeps the last list', async () => {
    // Prepare: a clock of our own, and a zero-delay fault rule that counts the listing requests.
    let clock = Date.now();
    const own = new OwnAddresses(h.agentmail, ['Extra@Ours.example'], 60_000, () => clock);
    const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('ERROR') });
    const isOwn = (address: string, inbox: string) => env.run(() => own.isOwn(address, inbox));
    const known = h.newInbox();
    await h.sandbox.createInbox(known);
    await h.sandbox.setFaults({ match: { method: 'GET', path: /^\/v0\/inboxes$/ }, action: 'delay', ms: 0 });
    const listings = async () => (await h.sandbox.faults())[0]?.hits ?? 0;
    try {
      // Act and assess, step by step.
      assert.equal(await isOwn('stranger@customer.example', known), false);
      const pages = await listings();
      assert.ok(pages >= 1);
      assert.equal(await isOwn('extra@ours.EXAMPLE', known), true, 'configured addresses count, any case');
      assert.equal(await isOwn(known, known), true);

      const created = h.newInbox('new');
      await h.sandbox.createInbox(created);
      assert.equal(await isOwn(created, known), false, 'within the refresh interval the cached list stands');
      assert.equal(await listings(), pages);
      clock += 60_001;
      assert.equal(await isOwn(created, known), true, 'past it, the list is fetched again');
      assert.equal(await listings(), 2 * pages);

      const unknown = h.newInbox('unknown');
      await h.sandbox.createInbox(unknown);
      const answers = await Promise.all(Array.from({ length: 10 }, () => isOwn('someone@customer.example', unknown)));
      assert.deepEqual(answers, Array<boolean>(10).fill(false));
      assert.equal(
        await listings(),
        3 * pages,
        'mail for an unknown inbox refreshes at once, ten callers share one listing',
      );

      await h.sandbox.setFaults({ match: { method: 'GET', path: /^\/v0\/inboxes$/ }, action: 'status', status: 500 });
      clock += 60_001;
      assert.equal(await isOwn(created, known), true, 'AgentMail failing: the last list stays in use');
      const fresh = new OwnAddresses(h.agentmail, [], 60_000);
      await assert.rejects(
        env.run(() => fresh.isOwn('someone@customer.example', known)),
        {
          type: 'OwnInboxesUnavailable',
          message: /\(500\)/,
        },
      );
    } finally {
      await h.sandbox.clearFaults();
    }
  });
});

describe('recipients: exactly one, from the message', () => {
  test('a Reply-To of 50 addresses → one reply, to the sender only', async () => {
    const inboxId = h.newInbox();
    const from = sender();
    const replyTo = Array.from(
      { length: 50 },
      (_, i) => `victim${i}@${i % 2 ? 'customer.example' : 'elsewhere.example'}`,
    );
    const { result } = await answered(inboxId, { from: `Ada <${from}>`, reply_to: replyTo });
    assert.equal(result.status, 'sent');
    const sent = await outbox(inboxId);
    assert.equal(sent.length, 1);
    assert.deepEqual(sent[0]!.message.to, [from]);
    assert.deepEqual([sent[0]!.message.cc ?? [], sent[0]!.message.bcc ?? []], [[], []]);
  });

  test('a single Reply-To in the sender’s domain is honoured (domain case-insensitive); another domain is ignored', async () => {
    const inboxId = h.newInbox();
    const same = await answered(inboxId, { from: sender(), reply_to: ['Billing <billing@CUSTOMER.example>'] });
    const other = await answered(inboxId, { from: 'grace@customer.example', reply_to: ['grace@elsewhere.example'] });
    assert.equal(same.result.status, 'sent');
    assert.equal(other.result.status, 'sent');
    const byMessage = new Map((await outbox(inboxId)).map((e) => [e.message.in_reply_to, e.message.to]));
    assert.deepEqual(byMessage.get(same.ref.messageId), ['billing@CUSTOMER.example']);
    assert.deepEqual(byMessage.get(other.ref.messageId), ['grace@customer.example']);
  });
});

describe('the per-sender budget', () => {
  test(`20 concurrent messages from one sender against a budget of ${BUDGET} → exactly ${BUDGET} replies`, async () => {
    // Prepare
    const inboxId = h.newInbox();
    const from = sender('burst');
    // Act: all 20 arrive together; their decisions race for the budget.
    const messages = await Promise.all(
      Array.from({ length: 20 }, (_, i) => arrive(inboxId, { from, subject: `#${i}` })),
    );
    const results = await Promise.all(messages.map(({ ref }) => h.resultOf(ref, 60_000)));
    // Assess
    const statuses = results.map((r) => (r.status === 'skipped' ? r.reason : r.status));
    assert.equal(statuses.filter((s) => s === 'sent').length, BUDGET, statuses.join(', '));
    assert.equal(statuses.filter((s) => s === 'sender-budget-exceeded').length, 20 - BUDGET, statuses.join(', '));
    assert.equal((await outbox(inboxId)).length, BUDGET);
    assert.equal(await reservedFor(h.db, from), BUDGET);
  });

  test('the budget counts an address both ways: rotating Reply-To through the sender’s domain, or many senders pointing it at one address', async () => {
    const inboxId = h.newInbox();
    // One sender, a new Reply-To (in its own domain) each time: the sender's budget still runs out.
    const robot = `robot-${randomUUID().slice(0, 8)}@robots.example`;
    const rotating: string[] = [];
    for (let i = 0; i < BUDGET + 2; i += 1) {
      const { result } = await answered(inboxId, {
        from: robot,
        reply_to: [`r${i}-${randomUUID().slice(0, 6)}@robots.example`],
      });
      rotating.push(result.status === 'skipped' ? result.reason : result.status);
    }
    assert.deepEqual(rotating, [
      ...Array<string>(BUDGET).fill('sent'),
      'sender-budget-exceeded',
      'sender-budget-exceeded',
    ]);
    // Seven senders of one domain, all at once, each pointing Reply-To at the same address
    // (another inbox: this one's hourly ceiling is nearly used up).
    const second = h.newInbox();
    const target = `target-${randomUUID().slice(0, 8)}@corp.example`;
    const converging = await Promise.all(
      Array.from({ length: BUDGET + 2 }, (_, i) =>
        answered(second, { from: `s${i}-${randomUUID().slice(0, 6)}@corp.example`, reply_to: [target] }),
      ),
    );
    const sent = (await outbox(second)).filter((e) => e.message.to[0] === target);
    assert.equal(converging.filter((m) => m.result.status === 'sent').length, BUDGET);
    assert.equal(sent.length, BUDGET);
  });

  test('the reservation itself: 40 decisions at once on 10 connections, one sender → exactly the budget; a replay reserves nothing more', async () => {
    // The end-to-end burst above rarely overlaps its decisions this tightly; here every one races.
    const inboxId = h.newInbox();
    const from = sender('race');
    const reserve = (i: number) =>
      reserveReply(
        h.db,
        { replyKey: `${inboxId}/<m${i}>/reply/v1`, inboxId, sender: from, recipient: from },
        { perAddress: BUDGET, perInboxPerHour: 1_000 },
      );
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => reserve(i)));
    const granted = outcomes.flatMap((o, i) => (o.granted ? [i] : []));
    assert.equal(granted.length, BUDGET);
    assert.equal(await reservedFor(h.db, from), BUDGET);
    // Prepare the replay: a decision retried after a crash finds its own row.
    assert.deepEqual(await reserve(granted[0]!), { granted: true, replayed: true });
    assert.equal(await reservedFor(h.db, from), BUDGET);
    // A released reply frees its place for the next message.
    assert.deepEqual(await releaseReply(h.db, `${inboxId}/<m${granted[0]!}>/reply/v1`), { released: true });
    assert.deepEqual(await reserve(100), { granted: true, replayed: false });
    assert.deepEqual(await reserve(101), { granted: false, reason: 'sender-budget-exceeded' });
    // A recorded decision replayed after its release (an operator re-runs the message) counts again.
    await retakeReply(h.db, `${inboxId}/<m${granted[0]!}>/reply/v1`);
    assert.equal(await reservedFor(h.db, from), BUDGET + 1);
  });

  test('a ping-pong with another agent that strips the loop headers stops within the budget', async () => {
    const inboxId = h.newInbox();
    const robot = `agent-${randomUUID().slice(0, 8)}@robots.example`;
    // The other agent answers every email at once, with none of the headers that mark a robot.
    let next = await arrive(inboxId, { from: robot, subject: 'Hello', text: 'Hello, how can I help?' });
    const rounds: string[] = [];
    for (let round = 0; round < 3 * BUDGET; round += 1) {
      const result = await h.resultOf(next.ref);
      rounds.push(result.status === 'skipped' ? result.reason : result.status);
      if (result.status !== 'sent') break;
      next = await arrive(inboxId, {
        from: robot,
        subject: 'Re: Hello',
        text: `Thank you for your answer (round ${round}). How else can I help?`,
        in_reply_to: result.replyMessageId,
      });
    }
    assert.deepEqual(rounds, [...Array<string>(BUDGET).fill('sent'), 'sender-budget-exceeded']);
    assert.equal((await outbox(inboxId)).length, BUDGET);
  });

  test('a customer’s quick follow-up to our answer is not a robot: it is answered', async () => {
    const inboxId = h.newInbox();
    const from = sender();
    const first = await answered(inboxId, { from });
    assert.equal(first.result.status, 'sent');
    const [ours] = await outbox(inboxId);
    // Seconds later, as a mail client sends it: a reply to our answer, in the thread.
    const followUp = await answered(inboxId, {
      from: `Ada Lovelace <${from}>`,
      subject: `Re: ${ours!.message.subject ?? ''}`,
      text: 'Thanks! And can I change the delivery address?',
      in_reply_to: ours!.message.message_id,
      references: [first.ref.messageId, ours!.message.message_id],
      headers: { 'In-Reply-To': ours!.message.message_id, 'User-Agent': 'Thunderbird' },
    });
    assert.equal(followUp.result.status, 'sent');
    assert.equal((await outbox(inboxId)).length, 2);
  });

  test('a reviewer’s rejection gives the reservation back', async () => {
    const from = sender('rejected');
    const { ref } = await arrive(APPROVAL_INBOX, { from });
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await eventually(
      async () =>
        (await handle.describe().catch(() => undefined))?.searchAttributes.ReplyStatus?.[0] === 'awaiting_approval'
          ? true
          : undefined,
      'the reply to await approval',
    );
    assert.equal(await reservedFor(h.db, from), 1, 'reserved when decided');
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', reviewer: 'grace' }] });
    assert.equal((await handle.result()).status, 'rejected');
    assert.equal(await reservedFor(h.db, from), 0);
  });

  test('a run that fails before its send gives the reservation back', async () => {
    const inboxId = h.newInbox();
    const from = sender('refused');
    const { ref } = await arrive(inboxId, { from, text: 'PLEASE-REFUSE this one' });
    await assert.rejects(h.resultOf(ref), /Workflow execution failed/);
    assert.equal(await reservedFor(h.db, from), 0);
    assert.equal((await outbox(inboxId)).length, 0);
  });
});

describe('robots', () => {
  const marks: Array<[Record<string, string>, string]> = [
    [{ 'X-Autoreply': 'yes' }, 'auto-responder'],
    [{ 'X-Autorespond': 'yes' }, 'auto-responder'],
    [{ Precedence: 'auto_reply' }, 'auto-responder'],
    [{ 'X-Auto-Response-Suppress': 'All' }, 'auto-response-suppressed'],
    [{ 'X-Auto-Response-Suppress': 'OOF' }, 'auto-response-suppressed'],
    [{ 'X-Auto-Response-Suppress': 'AutoReply' }, 'auto-response-suppressed'],
    [{ 'Return-Path': '<>' }, 'bounce'],
    [{ 'Auto-Submitted': 'auto-generated' }, 'auto-submitted'],
  ];
  test('each auto-responder mark, and an empty Return-Path, is skipped with its reason; nothing is sent', async () => {
    const inboxId = h.newInbox();
    const results = await Promise.all(marks.map(([headers]) => answered(inboxId, { from: sender(), headers })));
    assert.deepEqual(
      results.map((r) => r.result),
      marks.map(([, reason]) => skipped(reason)),
    );
    assert.equal((await outbox(inboxId)).length, 0);
  });
});

describe('the per-inbox ceiling', () => {
  test(`past ${CEILING} replies an hour an inbox's messages get a ticket for a person, visible in the Web UI and the metrics`, async () => {
    // Prepare: the ceiling fills with messages from different senders (no sender's budget is near).
    const inboxId = h.newInbox();
    const trips = async () =>
      (await metrics.decisions.get()).values.find((v) => v.labels.outcome === 'inbox-ceiling-reached')?.value ?? 0;
    const tripsBefore = await trips();
    const filling = await Promise.all(Array.from({ length: CEILING }, () => answered(inboxId)));
    assert.deepEqual(
      filling.map((m) => m.result.status),
      Array<string>(CEILING).fill('sent'),
    );
    // Act: two more customers write.
    const past = await Promise.all([answered(inboxId), answered(inboxId)]);
    // Assess: no reply, a ticket each, the reason on the run's search attributes and in the metrics.
    for (const { ref, result } of past) {
      assert.equal(result.status, 'skipped');
      assert.equal(result.status === 'skipped' && result.reason, 'inbox-ceiling-reached');
      const tickets = await h.ticketsFor(ref);
      assert.equal(tickets.length, 1, 'a person answers instead');
      assert.equal(result.status === 'skipped' && result.ticketId, tickets[0]!.ticket_id);
      const description = await h.client.workflow.getHandle(inboundWorkflowId(ref)).describe();
      assert.deepEqual(description.searchAttributes.ReplyStatus, ['skipped']);
      assert.deepEqual(description.searchAttributes.SkipReason, ['inbox-ceiling-reached']);
    }
    assert.equal((await outbox(inboxId)).length, CEILING);
    assert.equal((await trips()) - tripsBefore, 2);
  });
});

describe('age and earlier answers', () => {
  test('a message older than REPLY_MAX_AGE gets a ticket, not a reply; a 6-day-old one is answered', async () => {
    const inboxId = h.newInbox();
    const old = await answered(inboxId, { timestamp: new Date(Date.now() - 8 * DAY).toISOString() });
    const recent = await answered(inboxId, { timestamp: new Date(Date.now() - 6 * DAY).toISOString() });
    assert.equal(old.result.status === 'skipped' && old.result.reason, 'too-old');
    assert.equal((await h.ticketsFor(old.ref)).length, 1, 'a person answers instead');
    assert.equal(recent.result.status, 'sent');
    assert.deepEqual(
      (await outbox(inboxId)).map((e) => e.message.in_reply_to),
      [recent.ref.messageId],
    );
  });

  test('a message AgentMail already has labelled replied is not answered again, whatever the store says', async () => {
    const inboxId = h.newInbox();
    const { result } = await answered(inboxId, { labels: ['received', 'replied'] });
    assert.deepEqual(result, skipped('already-replied'));
    assert.equal((await outbox(inboxId)).length, 0);
  });
});

describe('REPLYONCE_INBOXES', () => {
  test('a message for an inbox outside the allow-list is never answered (and gets no ticket); one inside is', async () => {
    const allowed = `allowed-${randomUUID().slice(0, 8)}@${SANDBOX_DOMAIN}`;
    const limited = await Harness.start({ allowedInboxes: [allowed] });
    try {
      const other = limited.newInbox();
      const refused = await limited.sandbox.inbound({ inbox_id: other, from: sender(), subject: 'Hi', text: 'Hello' });
      const welcome = await limited.sandbox.inbound({
        inbox_id: allowed,
        from: sender(),
        subject: 'Hi',
        text: 'Hello',
      });
      const refusedRef = { inboxId: other, messageId: refused.message.message_id };
      assert.deepEqual(await limited.resultOf(refusedRef), skipped('inbox-not-allowed'));
      assert.equal(
        (await limited.resultOf({ inboxId: allowed, messageId: welcome.message.message_id })).status,
        'sent',
      );
      assert.equal((await limited.sandbox.outbox({ inbox_id: other })).length, 0);
      assert.equal((await limited.ticketsFor(refusedRef)).length, 0);
    } finally {
      await limited.close();
    }
  });
});

describe('what the sender writes cannot wedge the message', () => {
  test('control characters in the subject and text (U+0000, which Postgres cannot store) → one reply, one ticket', async () => {
    // Prepare
    const inboxId = h.newInbox();

    // Act
    const { ref, result } = await answered(inboxId, {
      subject: 'Order\u0000 #42\u0007 is late',
      text: 'Where\u0000 is it?\u001b[31m',
    });

    // Assess
    assert.equal(result.status, 'sent');
    const sent = await outbox(inboxId);
    assert.equal(sent.length, 1);
    // eslint-disable-next-line no-control-regex -- looking for control characters is the point.
    assert.ok(!/[\u0000-\u0008\u001b]/.test(sent[0]!.message.text ?? ''), 'no control character in the reply');
    assert.match(sent[0]!.message.text ?? '', /Order #42 is late/);
    const tickets = await h.db.query<{ subject: string }>('SELECT subject FROM tickets WHERE message_id = $1', [
      ref.messageId,
    ]);
    assert.deepEqual(
      tickets.rows.map((t) => t.subject),
      ['Order #42 is late'],
    );
  });
});

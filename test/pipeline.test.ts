import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { inboundWorkflowId } from '../lib/hashing';
import {
  decisionKey,
  draftKey,
  INBOUND_MESSAGE_WORKFLOW,
  type InboundMessageResult,
  operationsQuery,
  replyKey,
  threadTicketKey,
  ticketKey,
  ticketReplyKey,
} from '../contract';
import { messageReceivedBody } from '../sandbox/control-client';
import { Harness } from './support/harness';
import { sendVerdict, waitForStatus } from './support/review';
import { historyText } from './support/history';
import { signedHeaders } from './support/signing';

// The whole path on real parts: the sandbox delivers a Svix-signed webhook over HTTP to the
// ingress, which starts the workflow on the real Temporal server; the worker's activities talk
// to the sandbox through the real agentmail SDK and to the real Postgres.
let h: Harness;
before(async () => {
  h = await Harness.start({ ownAddresses: ['agent@ours.example'] });
});
after(() => h.close());

// A sender per message: the per-sender reply budget is shared by every test on this database.
const customerMail = (inboxId: string, extra: Record<string, unknown> = {}) => ({
  inbox_id: inboxId,
  from: `Ada Lovelace <ada-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'Where is my order?',
  text: 'I ordered a difference engine last week. Where is it?',
  ...extra,
});

async function eventRows(eventId: string) {
  return (await h.db.query('SELECT outcome, workflow_id FROM inbound_events WHERE event_id = $1', [eventId])).rows;
}

describe('one message, end to end', () => {
  test('a signed webhook → the workflow completes → one reply with the drafted text, one ticket, labels, the event recorded', async () => {
    // Prepare: a zero-delay fault rule counts the reads of this inbox's messages.
    const inboxId = h.newInbox();
    await h.sandbox.setFaults({
      match: { method: 'GET', path: `/inboxes/${inboxId}/messages/` },
      action: 'delay',
      ms: 0,
    });
    // Act
    const inbound = await h.sandbox.inbound(customerMail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const result = await h.resultOf(ref);
    const sender = inbound.message.from;
    const messageReads = (await h.sandbox.faults())[0]?.hits;
    await h.sandbox.clearFaults();
    // Assess
    assert.equal(result.status, 'sent');
    assert.equal(
      messageReads,
      0,
      'decide, draft, ticket and send share one read of the message (the worker caches it), and that read is the thread’s (the ingress named the thread)',
    );
    const outbox = await h.sandbox.outbox({ inbox_id: inboxId });
    assert.equal(outbox.length, 1);
    const reply = outbox[0]!.message;
    assert.equal(reply.in_reply_to, ref.messageId);
    assert.deepEqual(reply.to, [sender.replace(/^.*<(.*)>$/, '$1')], 'to the sender alone, the bare address');
    assert.equal(reply.headers?.['Auto-Submitted'], 'auto-replied');
    assert.match(reply.text ?? '', /Thank you for writing to us about "Where is my order\?"/);
    assert.equal(result.status === 'sent' && result.replyMessageId, reply.message_id);
    assert.match(outbox[0]!.idempotency_key ?? '', /^replyonce-[0-9a-f]{64}$/);

    const stored = await h.db.query(`SELECT result->>'text' AS text FROM operations WHERE operation_key = $1`, [
      `${inboxId}/${ref.messageId}/draft/v1`,
    ]);
    assert.equal(stored.rows[0]?.text, reply.text, 'the email carries exactly the stored draft');

    const tickets = await h.ticketsFor(ref);
    assert.equal(tickets.length, 1);
    assert.equal(result.status === 'sent' && result.ticketId, tickets[0]!.ticket_id);

    const message = await h.agentmail.inboxes.messages.get(inboxId, ref.messageId);
    assert.ok(message.labels.includes('replied'));
    assert.ok(!message.labels.includes('unread'));

    assert.deepEqual(await eventRows(inbound.event_id), [{ outcome: 'queued', workflow_id: inboundWorkflowId(ref) }]);
    assert.equal(h.drafter.callsFor(ref), 1);
  });

  test('history holds ids and keys, not the email body or the drafted text; the query lists every operation', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(customerMail(inboxId, { text: 'SECRET-BODY-MARKER please help' }));
    const ref = { inboxId, messageId: inbound.message.message_id };
    await h.resultOf(ref);
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    // Every payload decoded: a JSON dump of the history holds them as base64 and would find nothing.
    const history = await historyText(h.client, handle);
    assert.ok(history.payloads > 10, `the history's payloads were decoded (${history.payloads})`);
    assert.ok(history.text.includes(ref.messageId), 'the ids are there, decoded: the search below can find text');
    assert.ok(!history.text.includes('SECRET-BODY-MARKER'), 'the email body is not in history');
    assert.ok(!history.text.includes('Thank you for writing'), 'the drafted text is not in history');
    assert.ok(!history.text.includes(inbound.message.from.replace(/^.*</, '').replace('>', '')), 'no address');
    // Every activity's retries are bounded (schedule-to-close): nothing retries forever.
    const scheduled = ((await handle.fetchHistory()).events ?? []).flatMap((e) =>
      e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes] : [],
    );
    assert.ok(scheduled.length >= 3);
    for (const activity of scheduled)
      assert.ok(Number(activity.scheduleToCloseTimeout?.seconds ?? 0) > 0, `${activity.activityType?.name} is bounded`);
    const operations = await handle.query(operationsQuery);
    assert.deepEqual(
      operations.map((o) => [o.kind, o.status]),
      [
        ['decision', 'executed'],
        ['ticket', 'executed'],
        ['draft', 'executed'],
        ['reply', 'executed'],
        ['ticket-reply', 'executed'],
      ],
    );
    const description = await handle.describe();
    assert.deepEqual(description.searchAttributes.ReplyStatus, ['sent']);
    assert.deepEqual(description.searchAttributes.ThreadId, [inbound.message.thread_id]);
    // The Web UI's "current details" on the workflow's page: the status and each effect, no content.
    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    const details = metadata.currentDetails ?? '';
    assert.match(details, /\*\*ReplyStatus\*\*: sent/);
    for (const row of ['decision/v1 | executed', 'draft/v1 | executed', 'ticket/v1 | executed', 'reply/v1 | executed'])
      assert.ok(details.includes(`| ${row} |`), `${row} in ${details}`);
    assert.ok(
      !details.includes('SECRET-BODY-MARKER') && !details.includes('@customer.example'),
      'no content in the details',
    );
  });
});

describe('what the sender controls cannot wedge the message', () => {
  test('a 990-character message_id (the ingress accepts up to 998 bytes) is answered once; its keys stay within their limits', async () => {
    // Prepare
    const inboxId = h.newInbox();
    const messageId = `<${randomUUID()}.${'x'.repeat(990 - 2 - 36 - 1 - '@customer.example'.length)}@customer.example>`;
    assert.equal(messageId.length, 990);

    // Act
    const inbound = await h.sandbox.inbound(customerMail(inboxId, { message_id: messageId }));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const result = await h.resultOf(ref);

    // Assess
    assert.equal(ref.messageId, messageId);
    assert.equal(result.status, 'sent');
    const outbox = await h.sandbox.outbox({ inbox_id: inboxId });
    assert.equal(outbox.length, 1);
    assert.equal(outbox[0]!.message.in_reply_to, messageId);
    const rows = await h.db.query<{ operation_key: string; status: string }>(
      'SELECT operation_key, status FROM operations WHERE operation_key LIKE $1 ORDER BY operation_key',
      [`${inboxId}/%`],
    );
    assert.deepEqual(
      rows.rows.map((r) => [r.operation_key, r.status]),
      [decisionKey(ref), draftKey(ref), replyKey(ref), ticketKey(ref)].map((key) => [key, 'complete']),
    );
    // The Postgres help desk keys the thread's ticket and the comments by their operation keys itself
    // (keyedInStore): their rows are their records, and they have none in the operation store.
    const ticket = await h.db.query<{ operation_key: string; ticket_id: string }>(
      'SELECT operation_key, ticket_id FROM tickets WHERE inbox_id = $1',
      [inboxId],
    );
    assert.deepEqual(
      ticket.rows.map((t) => t.operation_key),
      [threadTicketKey(inboxId, result.status === 'sent' ? result.replyThreadId : '')],
    );
    const comments = await h.db.query<{ comment_key: string }>(
      'SELECT comment_key FROM ticket_comments WHERE ticket_id = $1',
      [ticket.rows[0]!.ticket_id],
    );
    assert.deepEqual(comments.rows.map((c) => c.comment_key).sort(), [ticketKey(ref), ticketReplyKey(ref)].sort());
    for (const { operation_key: key } of rows.rows) {
      assert.ok(key.length < 400, `${key.length} characters`);
      assert.ok(key.startsWith(`${inboxId}/${messageId.slice(0, 64)}…#`), 'readable prefix, then the hash');
    }
    assert.equal(h.drafter.callsFor(ref), 1);
  });

  test('a subject with an angle-bracketed address and link is drafted into the reply as plain text; held for a person (a foreign link and address), approved, sent', async () => {
    const inboxId = h.newInbox();
    const subject = 'Invoice from <billing@example.com>, see <https://example.com/invoices/42>';
    const inbound = await h.sandbox.inbound(customerMail(inboxId, { subject }));
    const ref = { inboxId, messageId: inbound.message.message_id };
    // The drafted reply quotes a link and an address that are neither ours nor the customer's: it is
    // held (issue 22), never sent until a person approves.
    await sendVerdict(await waitForStatus(h, ref, 'held', 30_000), 'approve');
    const result = await h.resultOf(ref);
    assert.equal(result.status, 'sent');
    const [reply] = await h.sandbox.outbox({ inbox_id: inboxId });
    assert.ok(reply?.message.text?.includes('<billing@example.com>'), 'the offline drafter quotes the subject');
    assert.ok(reply?.message.text?.includes('<https://example.com/invoices/42>'));
  });
});

describe('duplicates', () => {
  test('the same delivery twice in sequence and 20 times at once → all 2xx, one workflow, one reply, one ticket, one model call', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound({ ...customerMail(inboxId), deliver: false });
    const ref = { inboxId, messageId: inbound.message.message_id };
    const body = messageReceivedBody(inbound, inbound.event_id);
    const deliver = () =>
      fetch(`${h.apiUrl}/webhooks/agentmail`, {
        method: 'POST',
        body,
        headers: signedHeaders(h.webhookSecret, body),
      }).then((r) => r.status);

    const sequential = [await deliver(), await deliver()];
    const concurrent = await Promise.all(Array.from({ length: 20 }, deliver));
    assert.deepEqual([...sequential, ...concurrent], Array(22).fill(204));

    await h.workflowResult(ref);
    let runs = 0;
    for await (const _ of h.client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(ref)}'` })) runs += 1;
    assert.equal(runs, 1);
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    assert.equal((await h.ticketsFor(ref)).length, 1);
    assert.equal(h.drafter.callsFor(ref), 1);
  });

  test('one email delivered to three inboxes (same message_id) → three workflows, three replies', async () => {
    const messageId = `<${randomUUID()}@customer.example>`;
    const inboxes = [h.newInbox('sales'), h.newInbox('support'), h.newInbox('billing')];
    for (const inboxId of inboxes) await h.sandbox.inbound(customerMail(inboxId, { message_id: messageId }));
    const results = await Promise.all(inboxes.map((inboxId) => h.resultOf({ inboxId, messageId })));
    assert.deepEqual(
      results.map((r) => r.status),
      ['sent', 'sent', 'sent'],
    );
    for (const inboxId of inboxes) assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
  });

  test('two distinct messages with identical bodies → two replies', async () => {
    const inboxId = h.newInbox();
    const first = await h.sandbox.inbound(customerMail(inboxId));
    const second = await h.sandbox.inbound(customerMail(inboxId));
    await h.resultOf({ inboxId, messageId: first.message.message_id });
    await h.resultOf({ inboxId, messageId: second.message.message_id });
    const outbox = await h.sandbox.outbox({ inbox_id: inboxId });
    assert.deepEqual(
      outbox.map((e) => e.message.in_reply_to).sort(),
      [first.message.message_id, second.message.message_id].sort(),
    );
  });

  test('AgentMail answers 404 to the label (the message was deleted after the reply): the reply stands, the run ends sent', async () => {
    const inboxId = h.newInbox();
    await h.sandbox.setFaults({
      match: { method: 'PATCH', path: `/inboxes/${inboxId}/messages/` },
      action: 'status',
      status: 404,
    });
    try {
      const inbound = await h.sandbox.inbound(customerMail(inboxId));
      const result = await h.resultOf({ inboxId, messageId: inbound.message.message_id });
      assert.equal(result.status, 'sent');
      assert.equal((await h.sandbox.faults())[0]?.hits, 1, 'the label was tried once, not retried');
      assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    } finally {
      await h.sandbox.clearFaults();
    }
  });

  test('an operator starting the workflow by hand for an answered message gets no second reply', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(customerMail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const first = await h.resultOf(ref);
    assert.equal(first.status, 'sent');

    // With the usual id, as `temporal workflow start --workflow-id …` would: refused, the run completed.
    await assert.rejects(
      h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
        workflowId: inboundWorkflowId(ref),
        taskQueue: h.taskQueue,
        args: [ref],
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      }),
      WorkflowExecutionAlreadyStartedError,
    );
    // Under another id (as after the old execution left Temporal's retention): the operation
    // store replays the draft, ticket and reply; nothing is sent or drafted again.
    const replayId = `manual-${randomUUID()}`;
    const replay = await h.client.workflow.execute(INBOUND_MESSAGE_WORKFLOW, {
      workflowId: replayId,
      taskQueue: h.taskQueue,
      args: [ref],
    });
    assert.equal(replay.status, 'sent');
    assert.equal(replay.status === 'sent' && replay.replayed, true);
    assert.equal(replay.status === 'sent' && first.status === 'sent' && replay.replyMessageId, first.replyMessageId);
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    assert.equal((await h.ticketsFor(ref)).length, 1);
    assert.equal(h.drafter.callsFor(ref), 1);
    // The query reports what the store answered: every operation, the decision too, replayed.
    const operations = await h.client.workflow.getHandle(replayId).query(operationsQuery);
    assert.deepEqual(
      operations.map((o) => [o.key, o.status]),
      [
        [decisionKey(ref), 'replayed'],
        [ticketKey(ref), 'replayed'],
        [draftKey(ref), 'replayed'],
        [replyKey(ref), 'replayed'],
        [ticketReplyKey(ref), 'replayed'],
      ],
    );
    // A start without search attributes (as by hand): the run sets them, so the Web UI finds it.
    const { searchAttributes } = await h.client.workflow.getHandle(replayId).describe();
    assert.deepEqual(
      [searchAttributes.InboxId, searchAttributes.MessageId, searchAttributes.ReplyStatus],
      [[inboxId], [ref.messageId], ['sent']],
    );
  });
});

describe('loop safety', () => {
  const skipCases: Array<[string, Record<string, unknown>, string]> = [
    ['an Auto-Submitted: auto-replied message', { headers: { 'Auto-Submitted': 'auto-replied' } }, 'auto-submitted'],
    ['a message from one of our own inboxes', { from: 'Our Agent <agent@ours.example>' }, 'from-own-inbox'],
    ['a mailing-list message', { headers: { 'List-Id': '<announce.lists.example>' } }, 'mailing-list'],
    ['bulk mail', { headers: { Precedence: 'bulk' } }, 'bulk-precedence'],
    ['a bounce from a mailer-daemon', { from: 'MAILER-DAEMON@mx.customer.example' }, 'robot-sender'],
  ];
  for (const [name, fields, reason] of skipCases) {
    // Robots, lists, bounces and our own mail open no ticket unless TICKET_FOR_ROBOTS (issue 18 point 4).
    test(`${name} gets no reply and no ticket; the workflow ends skipped (${reason})`, async () => {
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound(customerMail(inboxId, fields));
      const ref = { inboxId, messageId: inbound.message.message_id };
      const result = await h.resultOf(ref);
      assert.deepEqual({ ...result, ticketId: null }, { status: 'skipped', reason, ticketId: null });
      assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 0);
      assert.equal(h.drafter.callsFor(ref), 0);
      assert.equal((await h.ticketsFor(ref)).length, 0);
      const description = await h.client.workflow.getHandle(inboundWorkflowId(ref)).describe();
      assert.deepEqual(description.searchAttributes.ReplyStatus, ['skipped']);
    });
  }

  test('a normal message from the same sender as a skipped one is answered', async () => {
    const inboxId = h.newInbox();
    const robot = await h.sandbox.inbound(customerMail(inboxId, { headers: { 'Auto-Submitted': 'auto-generated' } }));
    const human = await h.sandbox.inbound(customerMail(inboxId, { from: robot.message.from }));
    assert.equal((await h.resultOf({ inboxId, messageId: robot.message.message_id })).status, 'skipped');
    assert.equal((await h.resultOf({ inboxId, messageId: human.message.message_id })).status, 'sent');
  });

  test('two agents cannot answer each other forever: our own reply, arriving back as inbound mail, is not answered', async () => {
    const inboxId = h.newInbox();
    const customer = await h.sandbox.inbound(customerMail(inboxId));
    await h.resultOf({ inboxId, messageId: customer.message.message_id });
    const [ours] = await h.sandbox.outbox({ inbox_id: inboxId });
    // Another agent's inbox receives our reply; it carries our Auto-Submitted header.
    const otherAgent = h.newInbox('other-agent');
    const echoed = await h.sandbox.inbound({
      inbox_id: otherAgent,
      from: inboxId,
      subject: ours!.message.subject ?? '',
      text: ours!.message.text ?? '',
      headers: ours!.message.headers ?? {},
    });
    const result = await h.resultOf({ inboxId: otherAgent, messageId: echoed.message.message_id });
    assert.equal(result.status, 'skipped');
  });

  test('past the per-sender budget, further messages from that sender are not answered (and, so configured, get no ticket)', async () => {
    const budgeted = await Harness.start({ replyBudgetPerSender: 2, ticketForSkipped: false });
    try {
      const inboxId = budgeted.newInbox();
      const from = `budget-${randomUUID().slice(0, 8)}@customer.example`;
      const results: InboundMessageResult[] = [];
      for (let i = 0; i < 3; i += 1) {
        const inbound = await budgeted.sandbox.inbound({ ...customerMail(inboxId), from });
        results.push(await budgeted.resultOf({ inboxId, messageId: inbound.message.message_id }));
      }
      assert.deepEqual(
        results.map((r) => r.status),
        ['sent', 'sent', 'skipped'],
      );
      assert.deepEqual(results[2], { status: 'skipped', reason: 'sender-budget-exceeded', ticketId: null });
      assert.equal((await budgeted.db.query('SELECT 1 FROM tickets WHERE inbox_id = $1', [inboxId])).rowCount, 2);
    } finally {
      await budgeted.close();
    }
  });
});

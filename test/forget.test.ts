import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { OperationErasedError, LeaseLostError } from '../activities/operation-store/errors';
import { OperationStore } from '../activities/operation-store/store';
import { pruneExpiredRecords } from '../activities/upkeep/retention';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { DraftAnswer, Drafter, DraftRequest } from '../activities/draft/drafting/drafter';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { ZendeskTickets } from '../activities/ticket/zendesk-tickets';
import { IntakeStore } from '../intake/intake-store';
import { buildHelpdeskStandIn } from '../sandbox/helpdesk/app';
import { HelpdeskControl } from '../sandbox/helpdesk/control-client';
import { INBOUND_MESSAGE_WORKFLOW, type MessageRef, operationKey, replyKey, reviewUpdate } from '../contract';
import type { Db } from '../lib/db';
import { inboundWorkflowId, requestHash } from '../lib/hashing';
import { erase, erasureIdOf, tombstoneOperation, type ErasureOutcome } from '../privacy/erase';
import { keyPrefixOf } from '../privacy/find-messages';
import { waitingQuery } from '../desk/waiting';
import { Harness } from './support/harness';
import { waitForStatus } from './support/review';
import { eventually } from './support/temporal';
import { testEnv } from './support/env';

const ADMIN_TOKEN = `admin-${randomUUID()}`;

/** Drafts like the offline drafter, but puts an unvetted link in the reply to a message that asks for it: a held draft. */
class HoldingDrafter implements Drafter {
  readonly name = 'offline';
  private readonly inner = new OfflineDrafter();
  async draft(request: DraftRequest): Promise<DraftAnswer> {
    const answer = await this.inner.draft(request);
    if (!request.text.includes('PLEASE-LINK')) return answer;
    return { ...answer, reply: `${answer.reply}\nSee https://unvetted.example.net/help for more.` };
  }
}

/** Every text and jsonb column (and text arrays) of every table, searched for each word: where it still is. */
async function whereInPostgres(db: Db, words: string[]): Promise<string[]> {
  const { rows: columns } = await db.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type IN ('text', 'jsonb', 'json', 'character varying', 'ARRAY', 'tsvector')`,
  );
  assert.ok(columns.length > 20, 'the grep sees the schema');
  const found: string[] = [];
  for (const { table_name, column_name } of columns) {
    for (const word of words) {
      const { rows } = await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM "${table_name}" WHERE "${column_name}"::text ILIKE '%' || $1 || '%'`,
        [word],
      );
      if (Number(rows[0]!.n) > 0) found.push(`${table_name}.${column_name} holds "${word}"`);
    }
  }
  return found;
}

/** An inbox whose replies wait for a verdict. */
const approvalInbox = `approvals-${randomUUID().slice(0, 8)}@sandbox.agentmail.local`;
let h: Harness;
let db: Db;
before(async () => {
  h = await Harness.start({ adminToken: ADMIN_TOKEN, drafter: new HoldingDrafter(), approvalInboxes: [approvalInbox] });
  db = h.db;
});
after(() => h?.close());

const forgetOverHttp = async (body: Record<string, unknown>): Promise<ErasureOutcome> => {
  const response = await fetch(`${h.apiUrl}/admin/forget`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, await response.clone().text());
  return (await response.json()) as ErasureOutcome;
};

const erasureDeps = () => ({ db, agentmail: h.agentmail, temporal: h.client, ticketProvider: 'postgres' as const });

describe('the operation store after an erasure (the in-flight guarantees)', () => {
  let store: OperationStore;
  before(() => {
    store = new OperationStore(db);
  });
  const claim = (key: string, owner: string) =>
    store.claim({ key, kind: 'reply', requestHash: requestHash({ t: 1 }), ownerToken: owner, leaseMs: 60_000 });
  const tombstonePrefix = async (ref: MessageRef) => {
    const erasureId = randomUUID().replace(/-/g, '').padEnd(64, '0');
    await db.query(`INSERT INTO erasures (erasure_id, mailbox_hash, requested_by) VALUES ($1, $1, 'test')`, [
      erasureId,
    ]);
    await db.query(
      `INSERT INTO erased_messages (key_prefix, workflow_id, inbox_id, message_id, erasure_id) VALUES ($1, $2, $3, $4, $5)`,
      [keyPrefixOf(ref.inboxId, ref.messageId), inboundWorkflowId(ref), ref.inboxId, ref.messageId, erasureId],
    );
  };
  const newRef = (): MessageRef => ({ inboxId: 'inbox@test', messageId: `<${randomUUID()}@test>` });

  test('a send that began before the erasure is waited for, and its tombstone keeps "complete"', async () => {
    const ref = newRef();
    const key = replyKey(ref);
    await claim(key, 'sender');
    await store.beginEffect(key, 'sender');
    await tombstonePrefix(ref);
    // The email is on its way: the erasure may not erase the row under it.
    assert.equal(await tombstoneOperation(db, key), false);
    await store.complete(key, 'sender', { messageId: 'sent-1', threadId: 't' });
    assert.equal(await tombstoneOperation(db, key), true);
    const row = await store.get(key);
    assert.equal(row?.status, 'complete');
    assert.deepEqual(row?.result, { erased: true });
    assert.ok(row?.erased_at);
    // A retry, a replay, a rerun: Erased, never the stored result, never a second send.
    await assert.rejects(claim(key, 'rerun'), OperationErasedError);
    await assert.rejects(store.completed(key, 'reply'), OperationErasedError);
  });

  test('an erasure before the send began: the send never begins, its result is never stored', async () => {
    const ref = newRef();
    const key = replyKey(ref);
    await claim(key, 'sender');
    assert.equal(await tombstoneOperation(db, key), true);
    await assert.rejects(store.beginEffect(key, 'sender'), OperationErasedError);
    await assert.rejects(store.complete(key, 'sender', { messageId: 'late' }), LeaseLostError);
    assert.equal((await store.get(key))?.result, null);
  });

  test('a key of an erased message that has no row yet is refused: claim, start and stored reads', async () => {
    const ref = newRef();
    await tombstonePrefix(ref);
    for (const key of [
      replyKey(ref),
      replyKey(ref, 2),
      operationKey(ref, 'notify-waiting'),
      operationKey(ref, 'some-new-effect'),
    ])
      await assert.rejects(claim(key, 'late-webhook'), OperationErasedError);
    assert.equal(await store.get(replyKey(ref)), undefined, 'no row was made');
    // Another message of the same inbox is untouched.
    const other = newRef();
    assert.equal((await claim(replyKey(other), 'x')).state, 'owned');
  });
});

describe('retention and erasure', () => {
  test('retention removes content past its period and keeps tombstones and erased messages', async () => {
    const ref = { inboxId: 'retention@test', messageId: `<${randomUUID()}@test>` };
    const old = new Date(Date.now() - 400 * 24 * 60 * 60 * 1000);
    const [tombstone, content] = [replyKey(ref), `retention@test/<${randomUUID()}@test>/draft/v1`];
    for (const [key, erased] of [
      [tombstone, old],
      [content, null],
    ] as const)
      await db.query(
        `INSERT INTO operations (operation_key, kind, request_hash, status, result, erased_at, first_attempt_at, created_at, updated_at)
         VALUES ($1, 'reply', $2, 'complete', '{"erased": true}', $3, $4, $4, $4)`,
        [key, '0'.repeat(64), erased, old],
      );
    const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
    await env.run(pruneExpiredRecords, { db, config: { OPERATION_RETENTION_DAYS: 90 } });
    const left = await db.query<{ operation_key: string }>(
      'SELECT operation_key FROM operations WHERE operation_key = ANY($1::text[])',
      [[tombstone, content]],
    );
    assert.deepEqual(
      left.rows.map((r) => r.operation_key),
      [tombstone],
      'the tombstone stays, the old content goes',
    );
  });
});

describe('forget a customer: three threads in two inboxes', () => {
  test('nothing of theirs is left in Postgres; redeliveries, a catch-up and reruns answer nothing; the receipt lists it all', async () => {
    const word = `zanzibar${randomUUID().slice(0, 6)}`;
    const secret = `quokkasecret${randomUUID().slice(0, 6)}`;
    const local = `ada.lovelace.${randomUUID().slice(0, 6)}`;
    // One customer, three spellings of one Gmail mailbox (the project's one comparison function).
    const spellings = [
      `${local}@gmail.com`,
      `${local.replace(/\./g, '')}+orders@googlemail.com`,
      `${local.toUpperCase()}@Gmail.com`,
    ];
    const bob = `bob-${randomUUID().slice(0, 6)}@example.org`;
    const plainInbox = h.newInbox('support');

    const send = async (inboxId: string, from: string, subject: string, text: string) => {
      const inbound = await h.sandbox.inbound({ inbox_id: inboxId, from, subject, text });
      return { ref: { inboxId, messageId: inbound.message.message_id }, eventId: inbound.event_id };
    };
    // 1. awaiting a verdict; 2. sent; 3. held (its draft carries an unvetted link); and Bob, who stays.
    const waiting = await send(approvalInbox, spellings[0]!, `Refund ${word}`, `My card ${secret} was charged twice.`);
    const sent = await send(plainInbox, spellings[1]!, `Delivery ${word}`, `Where is parcel ${secret}?`);
    const held = await send(plainInbox, spellings[2]!, `Login ${word}`, `Locked out ${secret}. PLEASE-LINK`);
    const other = await send(plainInbox, bob, 'Bob asks bobkeeps', 'Bob wants to keep his own words.');
    await waitForStatus(h, waiting.ref, 'awaiting_approval');
    assert.equal((await h.workflowResult(sent.ref)).status, 'sent');
    await waitForStatus(h, held.ref, 'held');
    assert.equal((await h.workflowResult(other.ref)).status, 'sent');
    const theirs = [waiting, sent, held];
    const before = {
      outbox: (await h.sandbox.outbox()).length,
      drafts: theirs.map((m) => h.drafter.callsFor(m.ref)),
      tickets: Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM tickets')).rows[0]!.n),
    };
    assert.ok((await whereInPostgres(db, [word, secret])).length > 0, 'their words are in Postgres before');
    await eventually(async () => {
      const listed: string[] = [];
      for await (const info of h.client.workflow.list({ query: waitingQuery([approvalInbox, plainInbox]) }))
        listed.push(info.workflowId);
      return [waiting, held].every((m) => listed.includes(inboundWorkflowId(m.ref))) ? true : undefined;
    }, 'the desk to list the two that wait for a person');

    // A dry run changes nothing.
    const dry = await forgetOverHttp({ address: spellings[0], dry_run: true });
    assert.equal(dry.dryRun, true);
    assert.equal(dry.receipt.found.messages, 3);
    assert.ok((await whereInPostgres(db, [word])).length > 0);

    // Forget, over the operator route.
    const first = await forgetOverHttp({ address: spellings[0], requested_by: 'dpo@team.example' });
    const receipt = first.receipt;
    assert.equal(first.repeated, false);
    assert.equal(receipt.found.messages, 3);
    assert.equal(receipt.found.inboxes >= 2, true);
    assert.deepEqual(receipt.messages.map((m) => m.messageId).sort(), theirs.map((m) => m.ref.messageId).sort());
    assert.equal(receipt.requestedBy, 'dpo@team.example');
    assert.ok(receipt.completedAt);
    assert.deepEqual(
      receipt.sentBeforeErasure.map((s) => s.messageId),
      [sent.ref.messageId],
    );
    assert.deepEqual([...receipt.temporal.ended].sort(), [waiting, held].map((m) => inboundWorkflowId(m.ref)).sort());
    assert.equal(receipt.temporal.workflows.length, 3);
    assert.ok(
      receipt.temporal.workflows.every((w) => w.found && !w.holdsErasedText),
      JSON.stringify(receipt.temporal),
    );
    const erasedOps = receipt.erased.find((e) => e.where === 'postgres:operations');
    assert.ok(erasedOps && erasedOps.count >= 6, JSON.stringify(receipt.erased));
    assert.ok(receipt.notErased.some((n) => n.where === 'backups'));
    assert.equal(
      JSON.stringify(receipt).toLowerCase().includes(local.toLowerCase()),
      false,
      'the receipt names no address',
    );
    assert.equal(JSON.stringify(receipt).includes(word), false, 'the receipt holds no content');

    // Nothing of theirs anywhere in Postgres; Bob's words are still there.
    const mailbox = `${local.replace(/\./g, '')}@gmail.com`;
    assert.deepEqual(await whereInPostgres(db, [word, secret, local, mailbox]), []);
    assert.ok((await whereInPostgres(db, ['bobkeeps'])).length > 0, "another customer's words stay");
    // AgentMail's copy is gone (its API deletes threads); Bob's is not.
    for (const m of theirs)
      await assert.rejects(h.agentmail.inboxes.messages.get(m.ref.inboxId, m.ref.messageId), /404|not found/i);
    await h.agentmail.inboxes.messages.get(other.ref.inboxId, other.ref.messageId);
    // The run that waited for a verdict ended without a send.
    const waitingRun = await h.client.workflow.getHandle(inboundWorkflowId(waiting.ref)).describe();
    assert.equal(waitingRun.status.name, 'TERMINATED');
    // The desk's queue (its own visibility query) shows nothing of theirs.
    await eventually(async () => {
      const listed: string[] = [];
      for await (const info of h.client.workflow.list({ query: waitingQuery([approvalInbox, plainInbox]) }))
        listed.push(info.workflowId);
      return theirs.some((m) => listed.includes(inboundWorkflowId(m.ref))) ? undefined : true;
    }, 'the desk to list none of their messages');

    // Then everything that could bring them back: retention has pruned the intake rows, the same
    // webhooks are redelivered, a catch-up lists the inboxes, each workflow is run again.
    await db.query('DELETE FROM intake WHERE workflow_id = ANY($1::text[])', [
      theirs.map((m) => inboundWorkflowId(m.ref)),
    ]);
    for (const m of theirs) await h.sandbox.redeliver(m.eventId);
    const intake = new IntakeStore(db, h.taskQueue);
    const batch = await intake.acceptBatch(
      plainInbox,
      theirs.map((m) => ({ ...m.ref, messageAt: new Date() })),
      undefined,
    );
    assert.equal(batch.created.size, 0, 'the catch-up hands none of them over');
    const catchUp = await fetch(`${h.apiUrl}/admin/replay`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inbox_ids: [approvalInbox, plainInbox], since: '1h' }),
    });
    assert.equal(catchUp.status, 200);
    for (const m of theirs) {
      const handle = await h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
        taskQueue: h.taskQueue,
        workflowId: inboundWorkflowId(m.ref),
        args: [m.ref],
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      const result = await handle.result();
      assert.deepEqual(result, { status: 'erased' }, `the rerun of ${m.ref.messageId} ends erased, without an answer`);
      assert.deepEqual((await handle.describe()).searchAttributes.ReplyStatus, ['erased']);
    }
    // Give the redelivered webhooks time to land (they would have started runs by now).
    await eventually(
      async () =>
        (await h.sandbox.deliveries()).filter((d) => theirs.some((m) => m.eventId === d.event_id)).length >= 6
          ? true
          : undefined,
      'the redeliveries',
    );
    const rows = await db.query('SELECT 1 FROM intake WHERE workflow_id = ANY($1::text[])', [
      theirs.map((m) => inboundWorkflowId(m.ref)),
    ]);
    assert.equal(rows.rowCount, 0, 'the intake refused them');
    assert.equal((await h.sandbox.outbox()).length, before.outbox, '0 emails');
    assert.deepEqual(
      theirs.map((m) => h.drafter.callsFor(m.ref)),
      before.drafts,
      '0 drafts',
    );
    assert.equal(
      Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM tickets')).rows[0]!.n),
      before.tickets,
      '0 tickets',
    );
    assert.deepEqual(await whereInPostgres(db, [word, secret, mailbox]), []);

    // The same erasure again reports the first.
    const again = await forgetOverHttp({ address: spellings[2] });
    assert.equal(again.repeated, true);
    const [a, b] = [canonical(again.receipt), canonical(receipt)];
    const at = [...a].findIndex((c, i) => c !== b[i]);
    assert.equal(a, b, `the receipts differ at ${at}: ${a.slice(at - 200, at + 200)} / ${b.slice(at - 200, at + 200)}`);

    // A NEW message from them after the erasure is a new message: answered as usual.
    const later = await send(plainInbox, spellings[0]!, 'A new question', 'Hello again, a new question.');
    assert.equal((await h.workflowResult(later.ref)).status, 'sent');
    // And when they ask again, `again` is a new erasure of what came since, with its own receipt.
    const second = await forgetOverHttp({ address: spellings[1], again: true });
    assert.equal(second.repeated, false);
    assert.notEqual(second.receipt.erasureId, receipt.erasureId);
    assert.deepEqual(
      second.receipt.messages.map((m) => m.messageId),
      [later.ref.messageId],
    );
  });

  test('a send under way when the erasure comes: the erasure waits for it, and the receipt says it went out before', async () => {
    const inboxId = h.newInbox();
    const address = `dan-${randomUUID().slice(0, 6)}@example.com`;
    // AgentMail takes 3 s to accept this inbox's reply: the erasure arrives while it is on its way.
    await h.sandbox.setFaults({ match: { method: 'POST', path: '/reply', count: 1 }, action: 'delay', ms: 3_000 });
    try {
      const inbound = await h.sandbox.inbound({
        inbox_id: inboxId,
        from: address,
        subject: 'Slow send',
        text: 'Under way',
      });
      const ref = { inboxId, messageId: inbound.message.message_id };
      await eventually(async () => {
        const row = await db.query(
          'SELECT 1 FROM operations WHERE operation_key = $1 AND effect_started_at IS NOT NULL',
          [replyKey(ref)],
        );
        return row.rowCount === 1 ? true : undefined;
      }, 'the send to begin');
      const outcome = await erase(erasureDeps(), { address, inboxes: [inboxId], requestedBy: 'test' });
      assert.deepEqual(
        outcome.receipt.sentBeforeErasure.map((s) => s.messageId),
        [ref.messageId],
      );
      const sent = (await h.sandbox.outbox({ inbox_id: inboxId })).filter(
        (e) => e.message.in_reply_to === ref.messageId,
      );
      assert.equal(sent.length, 1, 'the one email that was on its way, and no other');
      const row = (
        await db.query<{ status: string; result: unknown }>(
          'SELECT status, result FROM operations WHERE operation_key = $1',
          [replyKey(ref)],
        )
      ).rows[0];
      assert.deepEqual(row, { status: 'complete', result: { erased: true } });
    } finally {
      await h.sandbox.clearFaults();
    }
  });

  test('a verdict given after the erasure sends nothing: the first effect after it answers Erased', async () => {
    const address = `erin-${randomUUID().slice(0, 6)}@example.com`;
    const inbound = await h.sandbox.inbound({
      inbox_id: approvalInbox,
      from: address,
      subject: 'Wait for me',
      text: 'Pending words',
    });
    const ref = { inboxId: approvalInbox, messageId: inbound.message.message_id };
    const handle = await waitForStatus(h, ref, 'awaiting_approval');
    const before = (await h.sandbox.outbox({ inbox_id: approvalInbox })).length;
    // No Temporal given: the run is not ended, as on a workflow that goes on waiting after an erasure.
    const outcome = await erase(
      { ...erasureDeps(), temporal: undefined },
      { address, inboxes: [approvalInbox], requestedBy: 'test' },
    );
    assert.ok(outcome.receipt.notErased.some((n) => n.where === 'temporal'));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] });
    // The send's first effect answers Erased: the run ends erased (ReplyStatus too), not failed.
    assert.deepEqual(await handle.result(), { status: 'erased' }, 'the run ends erased, without a reply');
    assert.deepEqual((await handle.describe()).searchAttributes.ReplyStatus, ['erased']);
    assert.equal((await h.sandbox.outbox({ inbox_id: approvalInbox })).length, before, 'no email after the erasure');
  });

  test('--block holds their new mail for a person', async () => {
    const inboxId = h.newInbox();
    const address = `blocked-${randomUUID().slice(0, 6)}@example.net`;
    const first = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: address,
      subject: 'hi',
      text: 'first words here',
    });
    await h.resultOf({ inboxId, messageId: first.message.message_id });
    const outcome = await erase(erasureDeps(), { address, inboxes: [inboxId], block: true, requestedBy: 'test' });
    assert.equal(outcome.receipt.blocked, true);
    const next = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: address.toUpperCase(),
      subject: 'again',
      text: 'more',
    });
    const result = await h.resultOf({ inboxId, messageId: next.message.message_id });
    assert.equal(result.status === 'skipped' && result.reason, 'blocked-sender');
    assert.ok(result.status === 'skipped' && result.ticketId, 'held for a person: a ticket');
  });

  test('an erasure killed half-way (SIGKILL after its tombstones) is completed by the next run', async () => {
    const inboxId = h.newInbox();
    const word = `kumquat${randomUUID().slice(0, 6)}`;
    const address = `carol-${randomUUID().slice(0, 6)}@example.com`;
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: address,
      subject: `About ${word}`,
      text: `Text ${word}`,
    });
    const ref = { inboxId, messageId: inbound.message.message_id };
    assert.equal((await h.resultOf(ref)).status, 'sent');
    const env = {
      ...process.env,
      ...testEnv.temporalVars,
      DATABASE_URL: testEnv.databaseUrl,
      AGENTMAIL_API_KEY: h.apiKey,
      AGENTMAIL_BASE_URL: h.sandboxUrl,
    };
    const cli = (extra: Record<string, string>) =>
      promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', 'scripts/forget.ts', '--address', address, '--inbox', inboxId, '--json'],
        {
          env: { ...env, ...extra },
        },
      );
    const killed = await cli({ REPLYONCE_FAILPOINTS: 'erasure.after-tombstones' }).then(
      () => undefined,
      (error: { signal?: string }) => error,
    );
    assert.equal(killed?.signal, 'SIGKILL');
    const erasureId = erasureIdOf(
      (await db.query<{ mailbox_hash: string }>('SELECT mailbox_hash FROM erasures ORDER BY started_at DESC LIMIT 1'))
        .rows[0]!.mailbox_hash,
      [inboxId],
    );
    const half = await db.query<{ completed_at: Date | null }>(
      'SELECT completed_at FROM erasures WHERE erasure_id = $1',
      [erasureId],
    );
    assert.equal(half.rows[0]?.completed_at, null, 'killed before it finished');
    assert.ok((await whereInPostgres(db, [word])).length > 0, 'the content was still there when it died');
    // Already safe: the tombstones refuse a rerun.
    await assert.rejects(
      new OperationStore(db).claim({
        key: replyKey(ref),
        kind: 'reply',
        requestHash: 'x'.repeat(64),
        ownerToken: 'y',
        leaseMs: 1000,
      }),
      OperationErasedError,
    );

    const rerun = JSON.parse((await cli({})).stdout) as ErasureOutcome;
    assert.equal(rerun.receipt.erasureId, erasureId);
    assert.ok(rerun.receipt.completedAt);
    assert.equal(rerun.receipt.found.messages, 1);
    assert.deepEqual(
      rerun.receipt.sentBeforeErasure.map((s) => s.messageId),
      [ref.messageId],
    );
    assert.deepEqual(await whereInPostgres(db, [word, address]), []);
  });
});

describe('forget a customer whose tickets are in Zendesk', () => {
  test("their thread's ticket is deleted at Zendesk, permanently, through its API", async () => {
    const standIn = buildHelpdeskStandIn({ email: 'agent@team.example', apiToken: 'zd-token' });
    await standIn.app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}`;
    const zendesk = new ZendeskTickets({
      url,
      email: 'agent@team.example',
      apiToken: 'zd-token',
      timeoutMs: 2_000,
      markerSecret: 'forget-test-marker-secret-of-32-characters-at-least',
    });
    const helpdesk = new HelpdeskControl(url);
    const zh = await Harness.start({ tickets: zendesk });
    try {
      const inboxId = zh.newInbox();
      const word = `papaya${randomUUID().slice(0, 6)}`;
      const address = `zoe-${randomUUID().slice(0, 6)}@example.com`;
      const inbound = await zh.sandbox.inbound({
        inbox_id: inboxId,
        from: address,
        subject: word,
        text: `About ${word}`,
      });
      const result = await zh.resultOf({ inboxId, messageId: inbound.message.message_id });
      assert.equal(result.status, 'sent');
      const ticketId = result.status === 'sent' ? result.ticketId : null;
      assert.ok(ticketId);
      assert.ok(
        (await helpdesk.comments(ticketId)).some((c) => c.body.includes(word)),
        'their words are at Zendesk',
      );
      const outcome = await erase(
        { db: zh.db, agentmail: zh.agentmail, temporal: zh.client, ticketProvider: 'zendesk', zendesk },
        { address, inboxes: [inboxId], requestedBy: 'test' },
      );
      assert.deepEqual(
        outcome.receipt.erased.find((e) => e.where === 'zendesk'),
        { where: 'zendesk', what: 'tickets of their threads deleted permanently', count: 1 },
      );
      assert.equal(
        (await helpdesk.tickets()).some((t) => String(t.id) === ticketId),
        false,
        'the ticket is gone',
      );
      assert.deepEqual(await helpdesk.comments(ticketId), [], 'and its comments with it');
    } finally {
      await zh.close();
      await standIn.app.close();
    }
  });
});

/** JSON with keys sorted: jsonb keeps no key order, and the receipt's comparison should not care. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

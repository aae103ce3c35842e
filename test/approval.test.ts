import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import { inboundWorkflowId, providerIdempotencyKey } from '../lib/hashing';
import {
  decisionKey,
  draftKey,
  INBOUND_MESSAGE_WORKFLOW,
  type MessageRef,
  operationsQuery,
  providerDraftKey,
  replyKey,
  type ReplyStatus,
  reviewKey,
  reviewUpdate,
  ticketKey,
} from '../contract';
import {
  addReviewer,
  authenticateReviewer,
  listReviewers,
  reviewerTokenHash,
  revokeReviewer,
} from '../review/reviewers';
import { temporalCliPath } from '../scripts/services/temporal-dev-server';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { historyText } from './support/history';
import { eventually } from './support/temporal';

// Human approval: a reply to an inbox that requires it waits, as an AgentMail draft, for a
// person's verdict sent by Update (the Web UI, the admin route) or by Signal (the CLI).
let h: Harness;
const ADMIN_TOKEN = `admin-${randomUUID()}`;
before(async () => {
  h = await Harness.start({ approvalInboxes: ['*'], approvalTimeoutMs: 1_500, adminToken: ADMIN_TOKEN });
});
after(() => h.close());

async function awaitingApproval(): Promise<MessageRef> {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `review-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Refund?',
    text: 'I want my money back.',
  });
  const ref = { inboxId, messageId: inbound.message.message_id };
  // The short approval timeout may already have escalated it: both mean "waiting for a person".
  await waitForStatus(ref, 'awaiting_approval', 'escalated');
  return ref;
}

async function status(ref: MessageRef): Promise<string | undefined> {
  const description = await h.client.workflow
    .getHandle(inboundWorkflowId(ref))
    .describe()
    .catch(() => undefined);
  return description?.searchAttributes.ReplyStatus?.[0] as string | undefined;
}

async function waitForStatus(ref: MessageRef, ...wanted: ReplyStatus[]): Promise<void> {
  await eventually(
    async () => (wanted.includes((await status(ref)) as ReplyStatus) ? true : undefined),
    `ReplyStatus=${wanted.join('|')}`,
  );
}

const drafts = async (inboxId: string) => (await h.agentmail.inboxes.drafts.list(inboxId)).drafts;

describe('a reply that needs approval', () => {
  test('waits as one AgentMail draft, sends nothing; approval by Update sends that draft with the reply key', async () => {
    const ref = await awaitingApproval();
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    const waiting = await drafts(ref.inboxId);
    assert.equal(waiting.length, 1);

    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    assert.deepEqual(await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', reviewer: 'grace' }] }), {
      accepted: true,
    });
    const result = await handle.result();

    assert.equal(result.status, 'sent');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.match(outbox[0]!.endpoint, /\/drafts\/.+\/send$/);
    assert.equal(outbox[0]!.idempotency_key, providerIdempotencyKey(replyKey(ref, 1)));
    assert.equal(await status(ref), 'sent');
  });

  test('approval by Signal from the temporal CLI, as a person would type it', async () => {
    const ref = await awaitingApproval();
    await promisify(execFile)(temporalCliPath(), [
      'workflow',
      'signal',
      '--address',
      testEnv.temporalAddress,
      '--namespace',
      testEnv.namespace,
      '--workflow-id',
      inboundWorkflowId(ref),
      '--name',
      'review',
      '--input',
      '{"verdict":"approve","reviewer":"cli"}',
    ]);
    const result = await h.workflowResult(ref);
    assert.equal(result.status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });

  test('approval with edited text (a link and an address in angle brackets) sends the edit under the next key version (…/reply/v2), never v1', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    const edit =
      'We have refunded your order today: <https://example.com/refunds/42>.\nQuestions: <billing@example.com>';
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', text: edit, reviewer: 'grace' }] });
    const result = await handle.result();

    assert.equal(result.status === 'sent' && result.replyVersion, 2);
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.equal(outbox[0]!.message.text, edit);
    assert.equal(outbox[0]!.idempotency_key, providerIdempotencyKey(replyKey(ref, 2)));
    const v1 = await h.db.query('SELECT 1 FROM operations WHERE operation_key = $1', [replyKey(ref, 1)]);
    assert.equal(v1.rowCount, 0, "v1's key was never used");
    // The query shows each operation as its activity reported it, the edit's versions too.
    assert.deepEqual(
      (await handle.query(operationsQuery)).map((o) => [o.key, o.status]),
      [
        [decisionKey(ref), 'executed'],
        [draftKey(ref, 1), 'executed'],
        [ticketKey(ref), 'executed'],
        [providerDraftKey(ref, 1), 'executed'],
        [reviewKey(ref), 'executed'],
        [draftKey(ref, 2), 'executed'],
        [providerDraftKey(ref, 2), 'executed'],
        [replyKey(ref, 2), 'executed'],
      ],
    );
    // The edit travels in the Update's payload (documented): decoding finds it, so the history check elsewhere can fail.
    assert.ok((await historyText(h.client, handle)).text.includes('<https://example.com/refunds/42>'));
  });

  test('an edit with markup is refused by the Update itself, before any activity: nothing stored, the reply keeps waiting', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    for (const text of ['Your refund is <b>on its way</b>.', 'See <a href="https://example.com">here</a>', ' ']) {
      await assert.rejects(
        handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', text }] }),
        (error: unknown) =>
          error instanceof WorkflowUpdateFailedError &&
          error.cause instanceof ApplicationFailure &&
          error.cause.type === 'InvalidReview' &&
          /text (contains HTML|is empty)/.test(error.cause.message),
      );
    }
    const stored = await h.db.query('SELECT 1 FROM operations WHERE operation_key = $1', [reviewKey(ref)]);
    assert.equal(stored.rowCount, 0, 'the review activity never ran');
    assert.match(String(await status(ref)), /awaiting_approval|escalated/);
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', text: 'Plain: <billing@example.com>' }] });
    assert.equal((await handle.result()).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId }))[0]?.message.text, 'Plain: <billing@example.com>');
  });

  test('rejection sends nothing and ends rejected', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', reviewer: 'grace' }] });
    const result = await handle.result();
    assert.equal(result.status, 'rejected');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    assert.equal(await status(ref), 'rejected');
  });

  test('an invalid verdict is refused by the update with a reason, and the reply keeps waiting', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await assert.rejects(
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'maybe' as 'approve' }] }),
      WorkflowUpdateFailedError,
    );
    assert.match(String(await status(ref)), /awaiting_approval|escalated/);
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject' }] });
    assert.equal((await handle.result()).status, 'rejected');
  });

  test('past the approval timeout the reply is escalated, not sent; a later approval still sends it', async () => {
    const ref = await awaitingApproval();
    await waitForStatus(ref, 'escalated');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    await h.client.workflow
      .getHandle(inboundWorkflowId(ref))
      .executeUpdate(reviewUpdate, { args: [{ verdict: 'approve' }] });
    assert.equal((await h.workflowResult(ref)).status, 'sent');
  });

  test('a replay after approval reuses the stored verdict and draft: no second draft, no second email, no new wait', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', text: 'Edited once.' }] });
    const first = await handle.result();

    const replayId = `replay-${randomUUID()}`;
    const replay = await h.client.workflow.execute(INBOUND_MESSAGE_WORKFLOW, {
      workflowId: replayId,
      taskQueue: h.taskQueue,
      args: [ref],
    });
    assert.equal(replay.status, 'sent');
    assert.equal(
      replay.status === 'sent' && first.status === 'sent' && replay.replyMessageId,
      first.status === 'sent' && first.replyMessageId,
    );
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    const created = await h.db.query(
      "SELECT count(*)::int AS n FROM operations WHERE kind = 'provider-draft' AND operation_key LIKE $1",
      [`${ref.inboxId}/%`],
    );
    assert.equal(
      created.rows[0].n,
      2,
      'one AgentMail draft per draft version (v1 drafted, v2 edited), none from the replay',
    );
    // On the replay every operation, the decision too, is reported as replayed from the store.
    assert.deepEqual(
      (await h.client.workflow.getHandle(replayId).query(operationsQuery)).map((o) => [o.key, o.status]),
      [
        decisionKey(ref),
        draftKey(ref, 1),
        ticketKey(ref),
        providerDraftKey(ref, 1),
        reviewKey(ref),
        draftKey(ref, 2),
        providerDraftKey(ref, 2),
        replyKey(ref, 2),
      ].map((key) => [key, 'replayed']),
    );
  });

  test('the admin route sends a verdict behind the bearer token and says what became of it', async () => {
    const ref = await awaitingApproval();
    const review = (body: unknown, token: string | null = ADMIN_TOKEN) =>
      fetch(`${h.apiUrl}/admin/review`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify(body),
      });
    const approve = { inbox_id: ref.inboxId, message_id: ref.messageId, verdict: 'approve', reviewer: 'ops' };

    assert.equal((await review(approve, null)).status, 401);
    assert.equal((await review(approve, 'wrong-token-wrong-token')).status, 401);
    assert.equal((await review({ ...approve, verdict: 'maybe' })).status, 400);
    const markup = await review({ ...approve, text: 'Hello <script>alert(1)</script>' });
    assert.equal(markup.status, 400, 'the route applies the rule the Update applies');
    assert.match(((await markup.json()) as { message: string }).message, /text: the text contains HTML/);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0, 'nothing refused was sent');

    const accepted = await review(approve);
    assert.equal(accepted.status, 200);
    assert.deepEqual(await accepted.json(), { accepted: true });
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    assert.equal((await review(approve)).status, 404, 'the workflow has finished: nothing is waiting');
  });
});

describe('reviewer credentials', () => {
  test('a token is made once, stored only as its hash, names its reviewer, and stops working when revoked', async () => {
    const { reviewer, token } = await addReviewer(h.db, { name: 'Ana Lima', inboxes: ['Support@Example.com'] });
    assert.match(token, /^rvw_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(reviewer.inboxes, ['support@example.com']);
    const stored = await h.db.query('SELECT token_hash FROM reviewers WHERE id = $1', [reviewer.id]);
    assert.equal(stored.rows[0].token_hash, reviewerTokenHash(token));
    assert.notEqual(stored.rows[0].token_hash, token);
    const all = await h.db.query('SELECT * FROM reviewers');
    assert.ok(!JSON.stringify(all.rows).includes(token), 'the token itself is nowhere in the table');

    assert.equal((await authenticateReviewer(h.db, token))?.id, reviewer.id);
    assert.equal(await authenticateReviewer(h.db, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`), null);
    assert.equal(await authenticateReviewer(h.db, reviewer.id), null);
    assert.ok((await listReviewers(h.db)).some((r) => r.id === reviewer.id && r.revokedAt === null));

    assert.equal((await revokeReviewer(h.db, reviewer.id))?.id, reviewer.id);
    assert.equal(await authenticateReviewer(h.db, token), null, 'a revoked token names nobody');
    assert.ok((await listReviewers(h.db)).some((r) => r.id === reviewer.id && r.revokedAt !== null));
    assert.equal(await revokeReviewer(h.db, 'rv_nobody'), null);
  });
});

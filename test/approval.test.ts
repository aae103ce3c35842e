import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../activities';
import { NO_PROVIDER_DRAFT } from '../activities/draft/approval';
import { handoffRoute } from '../activities/draft/draft-reply';
import type { DraftAnswer, DraftRequest } from '../activities/draft/drafting/drafter';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { PostgresTickets } from '../activities/ticket/postgres-tickets';
import { activityConfig, loadApiConfig } from '../lib/config';
import { REVIEW_PROXY_SECRET_HEADER } from '../api/admin/review';
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
  reviewSignal,
  reviewStateQuery,
  reviewUpdate,
  ticketKey,
  ticketReplyKey,
} from '../contract';
import {
  addReviewer,
  authenticateReviewer,
  listReviewers,
  reviewerTokenHash,
  revokeReviewer,
} from '../review/reviewers';
import { listReviewAudit } from '../review/audit';
import { temporalCliPath } from '../scripts/services/temporal-dev-server';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { replyStatusOf } from './support/review';
import { historyText } from './support/history';
import { eventually } from './support/temporal';

// Human approval: a reply to an inbox that requires it waits (nothing sendable at AgentMail) for a
// person's verdict sent by Update (the Web UI, the admin route) or by Signal (the CLI).
let h: Harness;
const ADMIN_TOKEN = `admin-${randomUUID()}`;
/** REVIEW_PROXY_SECRET: what the authenticating proxy adds to every request it forwards. */
const PROXY_SECRET = `proxy-${randomUUID()}`;

/** Holds a message whose text says SLOW-DRAFT in `drafting` until the test releases it: the window before a draft exists. */
class GatedDrafter extends OfflineDrafter {
  private gate = Promise.withResolvers<void>();
  override async draft(request: DraftRequest): Promise<DraftAnswer> {
    if (request.text.includes('SLOW-DRAFT')) await this.gate.promise;
    return super.draft(request);
  }
  release(): void {
    this.gate.resolve();
    this.gate = Promise.withResolvers<void>();
  }
}
const slowDrafts = new GatedDrafter();

before(async () => {
  h = await Harness.start({
    approvalInboxes: ['*'],
    approvalTimeoutMs: 1_500,
    adminToken: ADMIN_TOKEN,
    drafter: slowDrafts,
    reviewProxyUserHeader: 'x-forwarded-email',
    reviewProxySecret: PROXY_SECRET,
  });
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

const status = (ref: MessageRef) => replyStatusOf(h, ref);

async function waitForStatus(ref: MessageRef, ...wanted: ReplyStatus[]): Promise<void> {
  await eventually(
    async () => (wanted.includes((await status(ref)) as ReplyStatus) ? true : undefined),
    `ReplyStatus=${wanted.join('|')}`,
  );
}

const drafts = async (inboxId: string) => (await h.agentmail.inboxes.drafts.list(inboxId)).drafts;

describe('a reply that needs approval', () => {
  test('waits with nothing sendable at AgentMail, sends nothing; approval by Update sends our stored text with the reply key', async () => {
    const ref = await awaitingApproval();
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    // No AgentMail draft: nothing in its console to press Send on (issue 39, point 2).
    assert.deepEqual(await drafts(ref.inboxId), [], 'no draft waits at AgentMail');

    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    assert.deepEqual(
      await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] }),
      { accepted: true, revision: 1 },
    );
    const result = await handle.result();

    assert.equal(result.status, 'sent');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.match(outbox[0]!.endpoint, /\/messages\/.+\/reply$/, "our stored text, not AgentMail's draft");
    assert.deepEqual(await drafts(ref.inboxId), [], 'the reviewed draft is gone from AgentMail');
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
      '{"verdict":"approve","revision":1,"reviewer":"cli"}',
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
    await handle.executeUpdate(reviewUpdate, {
      args: [{ verdict: 'approve', revision: 1, text: edit, reviewer: 'grace' }],
    });
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
        [ticketKey(ref), 'executed'],
        [draftKey(ref, 1), 'executed'],
        [providerDraftKey(ref, 1), 'executed'],
        [reviewKey(ref), 'executed'],
        [draftKey(ref, 2), 'executed'],
        [replyKey(ref, 2), 'executed'],
        [ticketReplyKey(ref), 'executed'],
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
        handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, text, reviewer: 'grace' }] }),
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
    await handle.executeUpdate(reviewUpdate, {
      args: [{ verdict: 'approve', revision: 1, text: 'Plain: <billing@example.com>', reviewer: 'grace' }],
    });
    assert.equal((await handle.result()).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId }))[0]?.message.text, 'Plain: <billing@example.com>');
  });

  test('rejection sends nothing and ends rejected', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'grace' }] });
    const result = await handle.result();
    assert.equal(result.status, 'rejected');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    assert.equal(await status(ref), 'rejected');
  });

  test('an invalid verdict is refused by the update with a reason, and the reply keeps waiting', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await assert.rejects(
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'maybe' as 'approve', revision: 1, reviewer: 'grace' }] }),
      WorkflowUpdateFailedError,
    );
    assert.match(String(await status(ref)), /awaiting_approval|escalated/);
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'grace' }] });
    assert.equal((await handle.result()).status, 'rejected');
  });

  test('past the approval timeout the reply is escalated, not sent; a later approval still sends it', async () => {
    const ref = await awaitingApproval();
    await waitForStatus(ref, 'escalated');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    await h.client.workflow
      .getHandle(inboundWorkflowId(ref))
      .executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] });
    assert.equal((await h.workflowResult(ref)).status, 'sent');
  });

  test('a replay after approval reuses the stored verdict and draft: no second draft, no second email, no new wait', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, {
      args: [{ verdict: 'approve', revision: 1, text: 'Edited once.', reviewer: 'grace' }],
    });
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
      1,
      'one provider-draft step (it makes nothing at AgentMail); none for the edit, none from the replay',
    );
    // On the replay every operation, the decision too, is reported as replayed from the store.
    assert.deepEqual(
      (await h.client.workflow.getHandle(replayId).query(operationsQuery)).map((o) => [o.key, o.status]),
      [
        decisionKey(ref),
        ticketKey(ref),
        draftKey(ref, 1),
        providerDraftKey(ref, 1),
        reviewKey(ref),
        draftKey(ref, 2),
        replyKey(ref, 2),
        ticketReplyKey(ref),
      ].map((key) => [key, 'replayed']),
    );
  });

  test('the admin route takes a verdict behind a reviewer token, records who from the token, and shows the audit', async () => {
    const ref = await awaitingApproval();
    const { reviewer, token } = await addReviewer(h.db, { name: 'Grace Hopper' });
    const approve = { inbox_id: ref.inboxId, message_id: ref.messageId, verdict: 'approve', revision: 1 };

    assert.equal((await review(approve, null)).status, 401);
    assert.equal((await review(approve, 'wrong-token-wrong-token')).status, 401);
    const admin = await review(approve, ADMIN_TOKEN);
    assert.equal(admin.status, 401, 'ADMIN_TOKEN approves nothing');
    assert.match(((await admin.json()) as { message: string }).message, /reviewer token/);
    const named = await review({ ...approve, reviewer: 'someone-else' }, token);
    assert.equal(named.status, 400, 'a reviewer name in the body is refused, not believed');
    assert.equal((await review({ ...approve, verdict: 'maybe' }, token)).status, 400);
    assert.equal((await review({ ...approve, revision: undefined }, token)).status, 400, 'the revision is required');
    const markup = await review({ ...approve, text: 'Hello <script>alert(1)</script>' }, token);
    assert.equal(markup.status, 400, 'the route applies the rule the Update applies');
    assert.match(((await markup.json()) as { message: string }).message, /text: the text contains HTML/);
    const elsewhere = await addReviewer(h.db, { name: 'Other team', inboxes: ['billing@elsewhere.example'] });
    assert.equal((await review(approve, elsewhere.token)).status, 403, 'a reviewer of other inboxes');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0, 'nothing refused was sent');

    const shown = await fetch(`${h.apiUrl}/admin/review/${ref.inboxId}/${encodeURIComponent(ref.messageId)}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(shown.status, 200);
    const state = (await shown.json()) as { revision: number; reason: string; text: string; draftKey: string };
    assert.equal(state.revision, 1);
    assert.equal(state.reason, 'approval required');
    assert.equal(state.draftKey, draftKey(ref, 1));
    assert.match(state.text, /Thank you for writing to us/);

    const accepted = await review(approve, token);
    assert.equal(accepted.status, 200);
    assert.deepEqual(await accepted.json(), { accepted: true, revision: 1 });
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);

    const late = await review({ ...approve, verdict: 'reject' }, token);
    assert.equal(late.status, 409, 'the run has finished: the verdict that stands is named');
    assert.match(
      ((await late.json()) as { message: string }).message,
      new RegExp(`approve of revision 1 by ${reviewer.id}`),
    );

    // Who approved this email, which revision, when: from the credential, in the route and the CLI.
    const audit = await fetch(`${h.apiUrl}/admin/review/${ref.inboxId}/${encodeURIComponent(ref.messageId)}/audit`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    assert.equal(audit.status, 200);
    const rows = ((await audit.json()) as { audit: Array<Record<string, unknown>> }).audit;
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.reviewerId, reviewer.id);
    assert.equal(rows[0]!.verdict, 'approve');
    assert.equal(rows[0]!.revision, 1);
    assert.ok(Date.now() - Date.parse(String(rows[0]!.at)) < 120_000);
    const cli = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'scripts/reviewer.ts', 'audit', inboundWorkflowId(ref)],
      { env: { ...process.env, DATABASE_URL: testEnv.databaseUrl } },
    );
    assert.match(cli.stdout, new RegExp(`approve\\s+revision 1\\s+by ${reviewer.id}`));
  });
});

/** POST /admin/review with a bearer token (or none). */
const review = (body: unknown, token: string | null) =>
  fetch(`${h.apiUrl}/admin/review`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });

const refusedWith = (pattern: RegExp) => (error: unknown) =>
  error instanceof WorkflowUpdateFailedError &&
  error.cause instanceof ApplicationFailure &&
  error.cause.type === 'ReviewRefused' &&
  pattern.test(error.cause.message);

describe('the approval gate', () => {
  test('a verdict sent while the message is still drafting is refused (409), never kept: the reply still waits for a real one', async () => {
    // The model stand-in is not in this file; a drafter that waits until told keeps the message in `drafting`.
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `early-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Refund?',
      text: `SLOW-DRAFT ${randomUUID()}`,
    });
    const ref = { inboxId, messageId: inbound.message.message_id };
    await waitForStatus(ref, 'drafting');
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await assert.rejects(
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'eager' }] }),
      refusedWith(/no verdict is awaited: ReplyStatus=drafting/),
    );
    const { token } = await addReviewer(h.db, { name: 'Eager' });
    const early = await review(
      { inbox_id: inboxId, message_id: ref.messageId, verdict: 'approve', revision: 1 },
      token,
    );
    assert.equal(early.status, 409);
    assert.match(((await early.json()) as { message: string }).message, /ReplyStatus=drafting/);
    // A Signal in the same window is logged and dropped.
    await handle.signal(reviewSignal, { verdict: 'approve', revision: 1, reviewer: 'eager' });

    slowDrafts.release();
    await waitForStatus(ref, 'awaiting_approval', 'escalated');
    assert.equal((await handle.query(reviewStateQuery)).verdict, null, 'no verdict was held for later');
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 0, 'nothing went out');
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'grace' }] });
    assert.equal((await handle.result()).status, 'rejected');
  });

  test('after one verdict is accepted, any other is refused naming the verdict that stands; a stale revision is refused', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    const state = await handle.query(reviewStateQuery);
    assert.equal(state.revision, 1);
    assert.equal(state.draftKey, draftKey(ref, 1));
    assert.equal(state.reason, 'approval required');
    assert.equal(state.verdict, null);
    for (const revision of [2, 7])
      await assert.rejects(
        handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision, reviewer: 'grace' }] }),
        refusedWith(new RegExp(`revision ${revision} is not the one awaiting a verdict \\(revision 1`)),
      );
    await assert.rejects(
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: '' }] }),
      (error: unknown) =>
        error instanceof WorkflowUpdateFailedError && /reviewer must name/.test(error.cause?.message ?? ''),
    );
    // Two reviewers at once: exactly one is accepted, the other told which verdict stands.
    const answers = await Promise.allSettled([
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] }),
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'linus' }] }),
    ]);
    const accepted = answers.filter((a) => a.status === 'fulfilled');
    assert.equal(accepted.length, 1);
    const refused = answers.find((a) => a.status === 'rejected');
    assert.ok(
      refused && refusedWith(/a verdict stands: (approve|reject) of revision 1 by (grace|linus)/)(refused.reason),
    );
    const result = await handle.result();
    const grace = answers[0].status === 'fulfilled';
    assert.equal(result.status, grace ? 'sent' : 'rejected');
    assert.deepEqual((await handle.query(reviewStateQuery)).verdict, {
      verdict: grace ? 'approve' : 'reject',
      revision: 1,
      reviewer: grace ? 'grace' : 'linus',
    });
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, grace ? 1 : 0);
    assert.deepEqual(await drafts(ref.inboxId), [], 'nothing at AgentMail either way');
  });

  test('a reject after an approve is refused, not answered "accepted", while the approved reply is on its way', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] });
    await assert.rejects(
      handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'linus' }] }),
      (error: unknown) =>
        // Refused by the validator while the run lives; once it has finished the workflow is gone for Updates.
        refusedWith(/a verdict stands: approve of revision 1 by grace/)(error) ||
        error instanceof WorkflowNotFoundError,
    );
    assert.equal((await handle.result()).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });

  test('nothing a person can click at AgentMail sends a second email: no draft waits there, approve sends one, reject none', async () => {
    const approved = await awaitingApproval();
    const rejected = await awaitingApproval();
    // A person with AgentMail's console (or the API key) looks for the waiting reply to send: there is none.
    for (const ref of [approved, rejected]) {
      assert.deepEqual(await drafts(ref.inboxId), [], 'nothing sendable at AgentMail');
      const row = await h.db.query('SELECT result FROM operations WHERE operation_key = $1', [
        providerDraftKey(ref, 1),
      ]);
      assert.equal(row.rows[0]?.result.draftId, NO_PROVIDER_DRAFT, 'the step records that no AgentMail draft was made');
    }
    const approvedText = (
      await h.db.query('SELECT result FROM operations WHERE operation_key = $1', [draftKey(approved, 1)])
    ).rows[0].result.text as string;
    await h.client.workflow
      .getHandle(inboundWorkflowId(approved))
      .executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] });
    await h.client.workflow
      .getHandle(inboundWorkflowId(rejected))
      .executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'grace' }] });
    assert.equal((await h.workflowResult(approved)).status, 'sent');
    assert.equal((await h.workflowResult(rejected)).status, 'rejected');
    const outbox = await h.sandbox.outbox({ inbox_id: approved.inboxId });
    assert.equal(outbox.length, 1, 'one email');
    assert.equal(outbox[0]!.message.text, approvedText, 'what was approved');
    assert.match(outbox[0]!.endpoint, /\/messages\/.+\/reply$/);
    assert.equal((await h.sandbox.outbox({ inbox_id: rejected.inboxId })).length, 0, 'a rejection sent nothing');
  });

  test('a rejected draft is deleted at AgentMail, and deleting it again (a retry) is no error', async () => {
    const ref = await awaitingApproval();
    const handle = h.client.workflow.getHandle(inboundWorkflowId(ref));
    await handle.executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: 'grace' }] });
    assert.equal((await handle.result()).status, 'rejected');
    assert.deepEqual(await drafts(ref.inboxId), []);
    const activities = createActivities({
      db: h.db,
      agentmail: h.agentmail,
      drafter: new OfflineDrafter(),
      tickets: new PostgresTickets(h.db),
      config: activityConfig(),
    });
    const again = await new MockActivityEnvironment().run(activities.deleteProviderDraft, {
      inboxId: ref.inboxId,
      providerDraftKey: providerDraftKey(ref, 1),
    });
    assert.deepEqual(again, { deleted: false });
  });
});

describe('reviewer credentials', () => {
  test('a hand-off goes to review only when somebody may review its inbox; with only reviewers of other inboxes it goes to the ticket', async () => {
    const inbox = h.newInbox();
    const other = h.newInbox();
    await addReviewer(h.db, { name: 'Other inboxes only', inboxes: [other] });
    // Reviewers of every inbox made by other tests on this shared database are set aside inside a
    // transaction that is rolled back: the route is asked on that transaction's view.
    const client = await h.db.connect();
    try {
      await client.query('BEGIN');
      await client.query('UPDATE reviewers SET revoked_at = now() WHERE inboxes IS NULL AND revoked_at IS NULL');
      assert.equal(await handoffRoute({ db: client, config: {} }, inbox), 'ticket', 'nobody may review it: the ticket');
      assert.equal(await handoffRoute({ db: client, config: {} }, other), 'review', 'its own reviewer may');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  test('REVIEW_PROXY_USER_HEADER without REVIEW_PROXY_SECRET stops the API at start-up, naming it', () => {
    const env = {
      DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
      AGENTMAIL_WEBHOOK_SECRET: h.webhookSecret,
      REVIEW_PROXY_USER_HEADER: 'x-forwarded-email',
    };
    assert.throws(() => loadApiConfig(env), /REVIEW_PROXY_SECRET is required when REVIEW_PROXY_USER_HEADER is set/);
    assert.equal(loadApiConfig({ ...env, REVIEW_PROXY_SECRET: PROXY_SECRET }).REVIEW_PROXY_SECRET, PROXY_SECRET);
  });

  test('`npm run reviewer -- add --inbox ""` (an unset shell variable) is refused, not stored as every inbox', async () => {
    const name = `Unset inbox ${randomUUID().slice(0, 8)}`;
    // Typed as an operator would, with $INBOX unset: `npm run reviewer -- add --name … --inbox "$INBOX"`.
    const run = spawnSync('npm', ['run', '--silent', 'reviewer', '--', 'add', '--name', name, '--inbox', ''], {
      cwd: path.resolve(__dirname, '..'),
      encoding: 'utf8',
      env: { ...process.env, DATABASE_URL: testEnv.databaseUrl },
    });
    const output = `${run.stdout}${run.stderr}`;
    assert.equal(run.status, 1, output);
    assert.match(output, /--inbox was empty/);
    assert.doesNotMatch(output, /token/);
    assert.ok(!(await listReviewers(h.db)).some((r) => r.name === name), 'no reviewer was stored');
    await assert.rejects(addReviewer(h.db, { name, inboxes: [' '] }), /--inbox was empty/);
    await assert.rejects(addReviewer(h.db, { name, inboxes: ['support@example.com', ''] }), /--inbox was empty/);
  });

  test('a trusted proxy (REVIEW_PROXY_USER_HEADER) names the reviewer; the audit records that identity', async () => {
    const ref = await awaitingApproval();
    const body = JSON.stringify({ inbox_id: ref.inboxId, message_id: ref.messageId, verdict: 'approve', revision: 1 });
    const post = (headers: Record<string, string>) =>
      fetch(`${h.apiUrl}/admin/review`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    const viaProxy = { [REVIEW_PROXY_SECRET_HEADER]: PROXY_SECRET };
    assert.equal((await post({ ...viaProxy, 'x-forwarded-email': '' })).status, 401, 'an empty header names nobody');
    // The API's port is the public webhook's: anyone who reaches it can set the header (issue 39, point 8).
    assert.equal((await post({ 'x-forwarded-email': 'mallory@example.com' })).status, 401, 'not from the proxy');
    assert.equal(
      (await post({ [REVIEW_PROXY_SECRET_HEADER]: `${PROXY_SECRET}x`, 'x-forwarded-email': 'mallory@example.com' }))
        .status,
      401,
      'a wrong secret',
    );
    assert.ok(
      ['awaiting_approval', 'escalated'].includes(String(await status(ref))),
      'nobody named themselves a reviewer',
    );
    const accepted = await post({ ...viaProxy, 'x-forwarded-email': 'Ana@Example.com' });
    assert.equal(accepted.status, 200);
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    const [row] = await listReviewAudit(h.db, { workflowId: inboundWorkflowId(ref) });
    assert.equal(row?.reviewerId, 'proxy:ana@example.com');
  });

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

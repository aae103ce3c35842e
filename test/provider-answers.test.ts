import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { providerIdempotencyKey } from '../lib/hashing';
import { draftKey, type InboundMessageResult, type MessageRef, operationsQuery, replyKey } from '../contract';
import type { FaultSpec } from '../sandbox/control-client';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import {
  activityFailureTypes,
  failureChain,
  inboundWorkflow,
  replyStatus,
  retryBackoff,
  within,
} from './support/workflow-watch';

// DESIGN.md's provider-outcome table, one row at a time: the sandbox answers the reply the
// way AgentMail can (lost responses, 409s, 5xx, timeouts, a forgotten key) and the tests count
// what left the building. The AgentMail client times out after 1 s so "slower than the
// client's timeout" costs seconds, not minutes.
let h: Harness;
before(async () => {
  h = await Harness.start({ agentmailTimeoutSeconds: 1 });
});
after(() => h.close());
afterEach(() => h.sandbox.clearFaults());

const HOUR_MS = 60 * 60 * 1000;

// A sender per message: the per-sender reply budget is shared by every test on this database.
const customerMail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Alan Turing <alan-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'The machine will not start',
  text: 'It hums, then stops. What should I try?',
});

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Only this inbox's reply endpoint, so a rule never touches another test's messages or the reads. */
const replyPath = (inboxId: string) => new RegExp(`^/v0/inboxes/${escapeRegExp(inboxId)}/messages/.+/reply$`);
const messagePath = (inboxId: string) => new RegExp(`^/v0/inboxes/${escapeRegExp(inboxId)}/messages/[^/]+$`);
const onReply = (inboxId: string, rule: Omit<FaultSpec, 'match'>, count?: number): FaultSpec => ({
  match: { method: 'POST', path: replyPath(inboxId), ...(count === undefined ? {} : { count }) },
  ...rule,
});

/** A message arrives in `inboxId` with the faults armed; resolves with its workflow once the webhook landed. */
async function arrive(inboxId: string, faults: FaultSpec[]): Promise<{ ref: MessageRef; handle: WorkflowHandle }> {
  await h.sandbox.setFaults(faults);
  const inbound = await h.sandbox.inbound(customerMail(inboxId));
  const ref = { inboxId, messageId: inbound.message.message_id };
  return { ref, handle: await inboundWorkflow(h, ref) };
}

const emailsFor = (ref: MessageRef) => h.sandbox.outbox({ inbox_id: ref.inboxId, in_reply_to: ref.messageId });

async function replyRow(ref: MessageRef) {
  const found = await h.db.query<{
    status: string;
    attempts: number;
    result: { messageId?: string; reconciled?: boolean } | null;
    error: { type?: string } | null;
  }>('SELECT status, attempts, result, error FROM operations WHERE operation_key = $1', [replyKey(ref)]);
  return found.rows[0];
}

const sentId = (result: InboundMessageResult) => (result.status === 'sent' ? result.replyMessageId : undefined);

/** Resolves with the failure the workflow ended with; fails the test if it completed, or still runs after `withinMs`. */
const failureOf = (handle: WorkflowHandle, withinMs: number): Promise<unknown> =>
  within(
    withinMs,
    handle.result().then(
      (result) => assert.fail(`the workflow completed (${JSON.stringify(result)}) instead of failing`),
      (error: unknown) => error,
    ),
    'the workflow (a final answer is being retried?)',
  );

describe('what AgentMail answers to the reply', () => {
  test(
    'the response is lost after the send committed → the retry carries the same Idempotency-Key and records the ORIGINAL message id; one email',
    { timeout: 45_000 },
    async () => {
      // Prepare
      const inboxId = h.newInbox();
      const { ref, handle } = await arrive(inboxId, [onReply(inboxId, { action: 'drop-after-commit' }, 1)]);
      const failures = activityFailureTypes(handle, 'sendReply');

      // Act
      const result = await handle.result();

      // Assess
      const emails = await emailsFor(ref);
      assert.equal(emails.length, 1, 'exactly one email');
      const expectedKey = providerIdempotencyKey(replyKey(ref));
      assert.equal(emails[0]!.idempotency_key, expectedKey);
      const keys = (await h.sandbox.idempotencyKeys()).filter((k) => k.endpoint.includes(inboxId));
      assert.deepEqual(
        keys.map((k) => [k.key, k.status]),
        [[expectedKey, 'completed']],
        'one key at AgentMail, ours, used by both attempts',
      );
      assert.equal(sentId(result), emails[0]!.message.message_id, 'the workflow records the original message id');
      assert.deepEqual(await failures, ['ReplyOutcomeUnknown'], 'the first attempt did not know its outcome');
      const row = await replyRow(ref);
      assert.equal(row?.status, 'complete');
      assert.equal(row?.attempts, 2, 'the second attempt resumed the same operation');
      assert.equal(row?.result?.messageId, emails[0]!.message.message_id);
    },
  );

  test(
    '409 "in progress" while the first send is still in flight past the client timeout → retried with the identical request; one email, workflow sent',
    { timeout: 45_000 },
    async () => {
      // Prepare: the sandbox holds the first send for 5 s after claiming the key (client timeout: 1 s)
      const inboxId = h.newInbox();
      const { ref, handle } = await arrive(inboxId, [onReply(inboxId, { action: 'delay', ms: 5_000 }, 1)]);
      const failures = activityFailureTypes(handle, 'sendReply');

      // Act
      const result = await handle.result();

      // Assess
      const seen = await failures;
      assert.ok(seen.includes('ReplyOutcomeUnknown'), `the first attempt timed out (saw ${seen.join(', ')})`);
      assert.ok(seen.includes('ReplyInProgress'), `at least one retry got 409 in progress (saw ${seen.join(', ')})`);
      assert.equal(result.status, 'sent');
      const emails = await emailsFor(ref);
      assert.equal(emails.length, 1);
      assert.equal(sentId(result), emails[0]!.message.message_id);
      assert.equal(emails[0]!.idempotency_key, providerIdempotencyKey(replyKey(ref)));
      assert.deepEqual(await replyStatus(handle), ['sent']);
    },
  );

  describe('a key reused with a different request', () => {
    /** The first send commits but its answer is lost; later sends fail (503) until the test is ready. */
    async function sentButUnanswered() {
      const inboxId = h.newInbox();
      const arrived = await arrive(inboxId, [
        onReply(inboxId, { action: 'drop-after-commit' }, 1),
        onReply(inboxId, { action: 'status', status: 503 }),
      ]);
      await eventually(
        async () => ((await emailsFor(arrived.ref)).length === 1 ? true : undefined),
        'the first send to commit',
      );
      // Between attempts: nothing of the send runs while the test edits Postgres.
      await retryBackoff(arrived.handle, 'sendReply', { minWindowMs: 500 });
      return arrived;
    }

    const alterStoredDraft = (ref: MessageRef) =>
      h.db.query(
        `UPDATE operations SET result = jsonb_set(result, '{text}', to_jsonb($2::text)) WHERE operation_key = $1`,
        [draftKey(ref), 'A different text than the one already sent.'],
      );

    test(
      'the reply row is still processing and the stored draft changed → our store refuses: non-retryable OperationConflict, ReplyStatus=failed, no second email',
      { timeout: 45_000 },
      async () => {
        // Prepare
        const { ref, handle } = await sentButUnanswered();
        assert.equal((await replyRow(ref))?.status, 'processing');

        // Act
        await alterStoredDraft(ref);
        await h.sandbox.clearFaults();
        const error = await failureOf(handle, 10_000);

        // Assess
        assert.deepEqual(failureChain(error), {
          activityType: 'sendReply',
          type: 'OperationConflict',
          nonRetryable: true,
        });
        assert.deepEqual(await replyStatus(handle), ['failed']);
        assert.equal((await emailsFor(ref)).length, 1, 'no second email');
      },
    );

    test(
      'the reply row is gone (past our retention) and the stored draft changed → AgentMail answers 409 reused: non-retryable ReplyConflict within seconds, no second email',
      { timeout: 45_000 },
      async () => {
        // Prepare
        const { ref, handle } = await sentButUnanswered();

        // Act
        await alterStoredDraft(ref);
        await h.db.query('DELETE FROM operations WHERE operation_key = $1', [replyKey(ref)]);
        await h.sandbox.clearFaults();
        const error = await failureOf(handle, 10_000);

        // Assess: final at the first answer, not retried
        assert.deepEqual(failureChain(error), { activityType: 'sendReply', type: 'ReplyConflict', nonRetryable: true });
        assert.deepEqual(await replyStatus(handle), ['failed']);
        assert.equal((await emailsFor(ref)).length, 1, 'no second email');
        const row = await replyRow(ref);
        assert.equal(row?.status, 'failed', 'the failure is stored: a replay repeats it instead of sending');
        assert.equal(row?.error?.type, 'ReplyConflict');
      },
    );
  });

  describe('an unknown outcome older than AgentMail keeps the key (~24 h)', () => {
    /**
     * The first attempt's outcome stays unknown (`first`), later attempts fail (503) while
     * 25 h pass: at AgentMail (the key expires) and in our row (`first_attempt_at`, which the
     * age check reads with Postgres's clock). Then AgentMail answers again.
     */
    async function unknownFor25Hours(first: 'drop-after-commit' | 'drop-before-commit') {
      const inboxId = h.newInbox();
      const arrived = await arrive(inboxId, [
        onReply(inboxId, { action: first }, 1),
        onReply(inboxId, { action: 'status', status: 503 }),
      ]);
      await retryBackoff(arrived.handle, 'sendReply');
      await h.sandbox.advanceClock(25 * HOUR_MS);
      const key = providerIdempotencyKey(replyKey(arrived.ref));
      assert.ok(!(await h.sandbox.idempotencyKeys()).some((k) => k.key === key), 'AgentMail no longer knows the key');
      const backdated = await h.db.query(
        `UPDATE operations SET first_attempt_at = first_attempt_at - interval '25 hours' WHERE operation_key = $1 AND status = 'processing'`,
        [replyKey(arrived.ref)],
      );
      assert.equal(backdated.rowCount, 1);
      await h.sandbox.clearFaults();
      return arrived;
    }

    test(
      'the earlier send did go out → found in the thread and recorded as reconciled; no second email',
      { timeout: 45_000 },
      async () => {
        // Prepare + Act
        const { ref, handle } = await unknownFor25Hours('drop-after-commit');
        const result = await handle.result();

        // Assess
        const emails = await emailsFor(ref);
        assert.equal(emails.length, 1, 'no second email although the key had expired');
        assert.equal(sentId(result), emails[0]!.message.message_id, 'the earlier reply is the one recorded');
        assert.equal((await replyRow(ref))?.result?.reconciled, true);
        const reply = (await handle.query(operationsQuery)).find((o) => o.kind === 'reply');
        assert.match(reply?.summary ?? '', /^reconciled /);
      },
    );

    test(
      'the earlier send never arrived → nothing in the thread, so exactly one email is sent',
      { timeout: 45_000 },
      async () => {
        // Prepare + Act
        const { ref, handle } = await unknownFor25Hours('drop-before-commit');
        const result = await handle.result();

        // Assess
        const emails = await emailsFor(ref);
        assert.equal(emails.length, 1, 'exactly one email');
        assert.equal(sentId(result), emails[0]!.message.message_id);
        assert.equal((await replyRow(ref))?.result?.reconciled, false);
      },
    );
  });

  test('5xx and timeouts for a while, then recovery → one email', { timeout: 45_000 }, async () => {
    // Prepare: a failing read, then the send answered 500, 503, and held past the client timeout
    const inboxId = h.newInbox();
    const { ref, handle } = await arrive(inboxId, [
      { match: { method: 'GET', path: messagePath(inboxId), count: 1 }, action: 'status', status: 502 },
      onReply(inboxId, { action: 'status', status: 500 }, 1),
      onReply(inboxId, { action: 'status', status: 503 }, 1),
      onReply(inboxId, { action: 'delay', ms: 2_500 }, 1),
    ]);
    const failures = activityFailureTypes(handle, 'sendReply');

    // Act
    const result = await handle.result();

    // Assess
    assert.equal(result.status, 'sent');
    const emails = await emailsFor(ref);
    assert.equal(emails.length, 1);
    assert.equal(sentId(result), emails[0]!.message.message_id);
    assert.ok((await failures).includes('ReplyOutcomeUnknown'));
    assert.ok(((await replyRow(ref))?.attempts ?? 0) >= 4, 'the send was attempted through all the faults');
    assert.equal(h.drafter.callsFor(ref), 1);
    assert.equal((await h.ticketsFor(ref)).length, 1);
  });
});

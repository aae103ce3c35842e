import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { issueRefund, refundKey, type RefundGateway, type RefundInput, type RefundRequest } from '../examples/refund';
import { OperationStore } from '../activities/operation-store/store';
import { createDb, type Db } from '../lib/db';
import { providerIdempotencyKey } from '../lib/hashing';
import { testEnv } from './support/env';

// The example effect (examples/refund.ts) on the real operation store: its keys keep
// one refund single across a replay and a lost response, and refuse a changed amount.
let db: Db;
let store: OperationStore;
before(() => {
  db = createDb(testEnv.databaseUrl);
  store = new OperationStore(db);
});
after(() => db.end());

/** A payment API that honours Idempotency-Key like Stripe's; it can commit a refund and then lose the answer. */
class FakePayments implements RefundGateway {
  readonly name = 'fake-payments';
  readonly refunds: Array<RefundRequest & { refundId: string; idempotencyKey: string }> = [];
  loseNextResponse = false;

  async refund(request: RefundRequest, options: { idempotencyKey: string }): Promise<{ refundId: string }> {
    const earlier = this.refunds.find((r) => r.idempotencyKey === options.idempotencyKey);
    const refund = earlier ?? {
      ...request,
      refundId: `re_${this.refunds.length + 1}`,
      idempotencyKey: options.idempotencyKey,
    };
    if (!earlier) this.refunds.push(refund);
    if (this.loseNextResponse) {
      this.loseNextResponse = false;
      throw new Error('socket hang up'); // committed, answer lost: an unknown outcome, retried
    }
    return { refundId: refund.refundId };
  }
}

const environment = () => new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
const refundOf = (amountCents: number): RefundInput => {
  const ref = { inboxId: 'billing@example.com', messageId: `<${randomUUID()}@customer.example>` };
  return { ...ref, key: refundKey(ref), chargeId: 'ch_1', amountCents, currency: 'eur' };
};
const report = (input: RefundInput, state: 'executed' | 'replayed') => ({ key: input.key, kind: 'refund', state });

describe('a new effect with its own operation key and provider key (the refund example)', () => {
  test('its keys follow the key table: <inbox>/<message>/refund/v1, and a provider key derived from it', () => {
    const input = refundOf(500);
    assert.equal(refundKey(input), `billing@example.com/${input.messageId}/refund/v1`);
    assert.match(providerIdempotencyKey(refundKey(input)), /^replyonce-[0-9a-f]{64}$/);
  });

  test('run twice (a retry, a replay) → one refund; the second run replays the stored result', async () => {
    const payments = new FakePayments();
    const input = refundOf(500);
    const first = await environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, input);
    const second = await environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, input);
    assert.deepEqual(
      [first, second],
      [
        { refundId: 're_1', operation: report(input, 'executed') },
        { refundId: 're_1', operation: report(input, 'replayed') },
      ],
    );
    assert.equal(payments.refunds.length, 1);
  });

  test('a lost response is retried with the same provider key: one refund', async () => {
    const payments = new FakePayments();
    const input = refundOf(700);
    payments.loseNextResponse = true;
    await assert.rejects(environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, input), /socket hang up/);
    const retried = await environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, input);
    assert.deepEqual(retried, { refundId: 're_1', operation: report(input, 'executed') });
    assert.equal(payments.refunds.length, 1);
    assert.equal(payments.refunds[0]!.idempotencyKey, providerIdempotencyKey(refundKey(input)));
  });

  test('the same key with a different amount is a conflict, never a second refund', async () => {
    const payments = new FakePayments();
    const input = refundOf(500);
    await environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, input);
    await assert.rejects(
      environment().run(issueRefund, { store, payments, leaseMs: 5_000 }, { ...input, amountCents: 5_000 }),
      (error: unknown) =>
        error instanceof ApplicationFailure && error.type === 'OperationConflict' && error.nonRetryable,
    );
    assert.equal(payments.refunds.length, 1);
  });
});

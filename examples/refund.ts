import { Context } from '@temporalio/activity';
import { providerIdempotencyKey } from '../lib/hashing';
import { type MessageRef, operationKey, type OperationReport } from '../contract';
import { runOperation } from '../activities/operation-store/run-operation';
import type { OperationStore } from '../activities/operation-store/store';

/**
 * How a new effect is added, shown on a refund. This module is an example, outside the
 * production build (tsconfig.build.json): the worker does not register it and no workflow calls
 * it; test/effect-example.test.ts runs it against the real operation store. A real effect is
 * this one file in activities/, its key function in contract/keys.ts, and two lines (below).
 *
 * Following DESIGN.md's key table, an effect needs:
 *  1. its operation key, `<inbox>/<message>/<kind>/v1` (contract/keys.ts, `operationKey`, which
 *     hashes ids too long for a key): stable across retries, restarts and replays; a new version
 *     only when the intended action changes (a different amount: v2). The workflow derives it
 *     once and passes it in; the activity never derives a key of its own;
 *  2. its provider key, derived from the operation key and never random: the payment API's
 *     `Idempotency-Key` (or an external id it can be looked up by), so a lost response is
 *     retried without a second refund;
 *  3. the *resolved* request, hashed by the store: the same key with another amount is a
 *     conflict (a bug, final), never a second refund;
 *  4. `runOperation`: claim → effect → store the result; a retry or a replay gets the stored
 *     result back; while the effect runs the claim's lease is renewed and Temporal heartbeated;
 *  5. the provider's answers as Temporal failures: an unknown outcome (timeout, 5xx, reset) is
 *     thrown as is or as a retryable ApplicationFailure (retried with the same key); what
 *     retrying cannot fix as `ApplicationFailure.create({ nonRetryable: true, type: 'RefundRejected' })`,
 *     which runOperation stores as the effect's final failure. Say what the provider answered
 *     (status, error name), never its response body: it lands in history (lib/provider-errors.ts);
 *  6. the operation's report (`operation`: executed or replayed) returned to the workflow, whose
 *     `operations` query shows it.
 *
 * To use it: in activities/index.ts, `issueRefund: (input: RefundInput) => issueRefund({ ...common, payments }, input)`;
 * in the workflow, `await operations.run(key, 'refund', effects.issueRefund({ ...ref, key, chargeId, amountCents, currency }), …)`
 * with `const key = refundKey(ref)` derived once, through a proxy with a heartbeat timeout, like the other effects.
 */

export interface RefundRequest {
  chargeId: string;
  amountCents: number;
  currency: string;
}

/** The payment provider's refund call, behind an interface like TicketProvider. */
export interface RefundGateway {
  readonly name: string;
  refund(
    request: RefundRequest,
    options: { idempotencyKey: string; signal?: AbortSignal },
  ): Promise<{ refundId: string }>;
}

export interface RefundInput extends MessageRef, RefundRequest {
  /** The refund's operation key (refundKey), derived by the workflow. */
  key: string;
}

export interface RefundDeps {
  store: OperationStore;
  payments: RefundGateway;
  leaseMs: number;
}

export const refundKey = (ref: MessageRef, version = 1) => operationKey(ref, 'refund', version);

export async function issueRefund(
  deps: RefundDeps,
  input: RefundInput,
): Promise<{ refundId: string; operation: OperationReport }> {
  const { key } = input;
  const request: RefundRequest = { chargeId: input.chargeId, amountCents: input.amountCents, currency: input.currency };
  const outcome = await runOperation<{ refundId: string }>(
    deps.store,
    { key, kind: 'refund', request: { ...request, gateway: deps.payments.name }, leaseMs: deps.leaseMs },
    () =>
      deps.payments.refund(request, {
        idempotencyKey: providerIdempotencyKey(key),
        signal: Context.current().cancellationSignal,
      }),
  );
  return { refundId: outcome.result.refundId, operation: outcome.operation };
}

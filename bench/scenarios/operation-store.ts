import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { OperationStore } from '../../activities/operation-store/store';
import { createDb, type Db } from '../../lib/db';
import { sha256Hex } from '../../lib/hashing';
import type { BenchContext } from '../support/context';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * Scenario 4: what the operation store costs per effect on the same Postgres, against the
 * least an effect could record — one bare INSERT of its result. Measured in this process over
 * a pg pool of the worker's size (the statements are the cost; there is no server in between):
 *
 * - claim + complete: a new effect (INSERT … ON CONFLICT DO NOTHING RETURNING, then the
 *   owner-checked UPDATE that stores the result), as every first attempt of an effect does;
 * - replay: the claim of an effect already complete (what every retry or replay pays);
 * - bare insert: INSERT of the key and the result, nothing else.
 */

export interface StoreFigures {
  repeat: number;
  kind: 'claim+complete' | 'replay' | 'bare insert';
  operations: number;
  /** Operations per second at the given concurrency. */
  throughput: number;
  latency: LatencySummary;
}

const bareTable = `CREATE TABLE IF NOT EXISTS bench_bare_effects (
  effect_key text PRIMARY KEY,
  result     jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
)`;

/** A result the size of a stored reply outcome (message and thread ids). */
const result = { messageId: `<${randomUUID()}@sandbox.agentmail.local>`, threadId: randomUUID(), reconciled: false };

async function timed(
  count: number,
  concurrency: number,
  operation: (index: number) => Promise<unknown>,
): Promise<{ throughput: number; latency: LatencySummary }> {
  const latencies = new Float64Array(count);
  let next = 0;
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const index = next++;
        const at = performance.now();
        await operation(index);
        latencies[index] = performance.now() - at;
      }
    }),
  );
  return { throughput: (count / (performance.now() - startedAt)) * 1000, latency: summarize(latencies) };
}

export async function runOperationStore(context: BenchContext): Promise<StoreFigures[]> {
  const { operations, concurrency } = context.options.store;
  const db: Db = createDb(context.env.databaseUrl, { max: 10 });
  const results: StoreFigures[] = [];
  try {
    await db.query(bareTable);
    const store = new OperationStore(db);
    const requestHash = sha256Hex('bench request');
    for (let repeat = 0; repeat < context.options.repeats; repeat++) {
      const tag = randomUUID().slice(0, 8);
      const keyOf = (i: number) => `support-0@sandbox.agentmail.local/<${tag}-${i}@mail.example.com>/reply/v1`;
      const owner = (i: number) => `bench-run/${tag}/${i}/1`;
      const kinds: Array<[StoreFigures['kind'], (i: number) => Promise<unknown>]> = [
        [
          'claim+complete',
          async (i) => {
            await store.claim({ key: keyOf(i), kind: 'reply', requestHash, ownerToken: owner(i), leaseMs: 15_000 });
            await store.complete(keyOf(i), owner(i), result);
          },
        ],
        [
          'replay',
          (i) =>
            store.claim({
              key: keyOf(i),
              kind: 'reply',
              requestHash,
              ownerToken: `${owner(i)}-retry`,
              leaseMs: 15_000,
            }),
        ],
        [
          'bare insert',
          (i) =>
            db.query('INSERT INTO bench_bare_effects (effect_key, result) VALUES ($1, $2)', [
              `${keyOf(i)}#bare`,
              JSON.stringify(result),
            ]),
        ],
      ];
      // The replay needs the claims first; the bare insert goes first or last by turns.
      const order = repeat % 2 === 0 ? kinds : [kinds[2], kinds[0], kinds[1]];
      for (const [kind, operation] of order as typeof kinds) {
        const { throughput, latency } = await timed(operations, concurrency, operation);
        results.push({ repeat, kind, operations, throughput, latency });
      }
      const line = results
        .slice(-3)
        .map((r) => `${r.kind} ${r.throughput.toFixed(0)}/s p50 ${r.latency.p50.toFixed(2)} ms`)
        .join(', ');
      context.log(`operation store repeat ${repeat + 1}/${context.options.repeats}: ${line}`);
    }
  } finally {
    await db.end();
  }
  return results;
}

import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

/**
 * The load generator: pre-signed deliveries POSTed over keep-alive connections (undici), either
 * open-loop at a fixed rate or closed-loop at a fixed concurrency. Both stop by themselves:
 * after their request count, or at their time limit, whichever comes first.
 *
 * Open-loop latency is measured from the moment a request was *due*, not from when it went
 * out, so a server (or a generator) that falls behind shows up in the figures instead of
 * quietly lowering the rate (no coordinated omission).
 */

export interface Delivery {
  body: string;
  headers: Record<string, string>;
}

export interface LoadResult {
  /** Requests started. */
  sent: number;
  /** Requests answered with 2xx. */
  ok: number;
  /** Answers by status; `error` counts transport errors and timeouts. */
  statuses: Record<string, number>;
  /** From the first request due to the last answer. */
  durationMs: number;
  /** 2xx answers per second over durationMs. */
  throughput: number;
  /** Per request, from due time (open loop) or send time (closed loop) to the answer, ms. */
  latencies: Float64Array;
  /** Per request, from send time to the answer, ms (equals `latencies` in closed loop). */
  serviceLatencies: Float64Array;
  /** When each request was actually sent (performance.now() origin: epochMs below). */
  sentAt: Float64Array;
  /** Date.now() at performance.now() = 0, to turn sentAt into wall-clock times. */
  epochMs: number;
  /** True when the time limit stopped the run before every request was sent. */
  truncated: boolean;
}

export interface Target {
  origin: string;
  path: string;
}

/** AgentMail gives a delivery 15 s; an answer later than that is a failure. */
const REQUEST_TIMEOUT_MS = 15_000;

function newPool(origin: string, connections: number): Pool {
  return new Pool(origin, {
    connections,
    pipelining: 1,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
    keepAliveTimeout: 30_000,
  });
}

class Recorder {
  readonly latencies: Float64Array;
  readonly serviceLatencies: Float64Array;
  readonly sentAt: Float64Array;
  readonly statuses: Record<string, number> = {};
  ok = 0;
  done = 0;
  lastAnswer = 0;

  constructor(readonly capacity: number) {
    this.latencies = new Float64Array(capacity).fill(Number.NaN);
    this.serviceLatencies = new Float64Array(capacity).fill(Number.NaN);
    this.sentAt = new Float64Array(capacity).fill(Number.NaN);
  }

  async send(pool: Pool, target: Target, delivery: Delivery, index: number, dueAt: number): Promise<void> {
    const sentAt = performance.now();
    this.sentAt[index] = sentAt;
    let status: string;
    try {
      const response = await pool.request({
        path: target.path,
        method: 'POST',
        headers: delivery.headers,
        body: delivery.body,
      });
      await response.body.dump();
      status = String(response.statusCode);
      if (response.statusCode >= 200 && response.statusCode < 300) this.ok += 1;
    } catch {
      status = 'error';
    }
    const answeredAt = performance.now();
    this.latencies[index] = answeredAt - dueAt;
    this.serviceLatencies[index] = answeredAt - sentAt;
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    this.lastAnswer = Math.max(this.lastAnswer, answeredAt);
    this.done += 1;
  }

  result(sent: number, startedAt: number, truncated: boolean): LoadResult {
    const durationMs = Math.max(1, this.lastAnswer - startedAt);
    return {
      sent,
      ok: this.ok,
      statuses: this.statuses,
      durationMs,
      throughput: (this.ok / durationMs) * 1000,
      latencies: this.latencies.subarray(0, sent).filter((v) => !Number.isNaN(v)),
      serviceLatencies: this.serviceLatencies.subarray(0, sent).filter((v) => !Number.isNaN(v)),
      sentAt: this.sentAt.subarray(0, sent),
      epochMs: Date.now() - performance.now(),
      truncated,
    };
  }
}

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

/**
 * Open loop: delivery i is due at start + i / rate (or at `schedule[i]` ms after the start, for
 * a delivery plan with its own timing). Stops after every delivery, or at maxDurationMs.
 */
export async function runOpenLoop(
  target: Target,
  deliveries: Delivery[],
  options: { rate?: number; scheduleMs?: Float64Array; connections: number; maxDurationMs: number },
): Promise<LoadResult> {
  const { rate, scheduleMs } = options;
  if (!scheduleMs && !(rate && rate > 0)) throw new Error('runOpenLoop needs a rate or a schedule');
  const dueOffset = (i: number) => (scheduleMs ? (scheduleMs[i] as number) : (i * 1000) / (rate as number));
  const pool = newPool(target.origin, options.connections);
  const recorder = new Recorder(deliveries.length);
  const inFlight = new Set<Promise<void>>();
  const startedAt = performance.now();
  let next = 0;
  let truncated = false;
  try {
    while (next < deliveries.length) {
      const elapsed = performance.now() - startedAt;
      if (elapsed > options.maxDurationMs) {
        truncated = true;
        break;
      }
      while (next < deliveries.length && dueOffset(next) <= elapsed) {
        const index = next++;
        const sending = recorder.send(pool, target, deliveries[index] as Delivery, index, startedAt + dueOffset(index));
        inFlight.add(sending);
        void sending.finally(() => inFlight.delete(sending));
      }
      await tick();
    }
    await Promise.all(inFlight);
  } finally {
    await pool.close();
  }
  return recorder.result(next, startedAt, truncated);
}

/** Closed loop: `concurrency` senders, each sending its next delivery when the last is answered. */
export async function runClosedLoop(
  target: Target,
  deliveries: Delivery[],
  options: { concurrency: number; maxDurationMs: number },
): Promise<LoadResult> {
  const pool = newPool(target.origin, options.concurrency);
  const recorder = new Recorder(deliveries.length);
  const startedAt = performance.now();
  let next = 0;
  let truncated = false;
  const sender = async () => {
    for (;;) {
      if (performance.now() - startedAt > options.maxDurationMs) {
        truncated = next < deliveries.length;
        return;
      }
      if (next >= deliveries.length) return;
      const index = next++;
      await recorder.send(pool, target, deliveries[index] as Delivery, index, performance.now());
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, sender));
  } finally {
    await pool.close();
  }
  return recorder.result(next, startedAt, truncated);
}

/** Statuses other than 2xx, e.g. "500×3, error×1", or "" when every answer was 2xx. */
export function failures(result: LoadResult): string {
  return Object.entries(result.statuses)
    .filter(([status]) => !/^2\d\d$/.test(status))
    .map(([status, count]) => `${status}×${count}`)
    .join(', ');
}

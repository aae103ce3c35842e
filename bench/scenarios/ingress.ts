import { fixedRateSeconds } from '../options';
import type { BenchContext } from '../support/context';
import { CpuMeter, cpuPer, loadAverage, othersBusy } from '../support/context';
import { seededRandom } from '../support/deliveries';
import { failures, runClosedLoop, runOpenLoop, type Delivery, type LoadResult } from '../support/load';
import {
  sidesInOrder,
  startBaselineSide,
  startOurSide,
  startStartOnlySide,
  WEBHOOK_PATH,
  type Side,
  type SideName,
} from '../support/sides';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * Scenarios 1, 2 and 5 (ingress half): unique webhooks at fixed rates (1×, 4×, 16×), the highest
 * rate sustained with p99 under 100 ms, and a duplicate storm — ours and the baseline in the same
 * repeat, in alternating order. Ours always runs with its worker (as in production), on a fresh
 * task queue per run so no run inherits another's backlog.
 */

export interface RunFigures {
  side: SideName;
  /**
   * equal-priority: ours with its worker at the API's CPU priority (WORKER_NICE=0), not the default 10.
   * shared-cores: ours and the baseline at the same rate at the same moment, while our worker
   * drains ours: both doors under the same contention (the control for ours' tail latency).
   */
  variant?: 'equal-priority' | 'shared-cores';
  repeat: number;
  offered: number;
  sent: number;
  ok: number;
  failures: string;
  throughput: number;
  latency: LatencySummary;
  /** CPU ms per request, by process. */
  cpuMs: Record<string, number>;
  machineBusy: number;
  /** Share of the machine busy with processes outside the bench (a noisy neighbour). */
  othersBusy: number;
  load: [number, number, number];
}

export interface SearchFigures {
  side: SideName;
  /** Ours: whether the worker ran (production) or the ingress ran alone (its workflows only queue). */
  worker: boolean;
  repeat: number;
  /** Highest rate whose p99 stayed under 100 ms with every delivery answered 2xx (0: not even the first). */
  maxSustained: number;
  /** The cap was reached without failing: the true maximum is higher. */
  capped: boolean;
  steps: Array<{ rate: number; p99: number; throughput: number; failures: string; passed: boolean }>;
}

export interface StormFigures {
  side: SideName;
  repeat: number;
  /** Closed loop, 90 % repeats: how many deliveries per second one process answers. */
  mixed: RunFigures;
  /** Closed loop, repeats only: the duplicate path alone. */
  duplicatesOnly: RunFigures;
  /** Open loop at a fixed rate, 90 % repeats: latency. */
  fixedRate: RunFigures;
}

export interface IngressResults {
  fixedRate: RunFigures[];
  search: SearchFigures[];
  storm: StormFigures[];
}

const P99_LIMIT_MS = 100;
/** How long the storm waits for the primed events' workflows to finish before it starts. */
const SETTLE_TIMEOUT_MS = 60_000;
/** Requests still unanswered this long after the last was due are failures (AgentMail waits 15 s). */
const STRAGGLER_MS = 16_000;

function figures(side: SideName, repeat: number, offered: number, result: LoadResult, meter: CpuMeter): RunFigures {
  const usage = meter.read();
  return {
    side,
    repeat,
    offered,
    sent: result.sent,
    ok: result.ok,
    failures: failures(result),
    throughput: result.throughput,
    latency: summarize(result.latencies),
    cpuMs: cpuPer(usage, result.sent),
    machineBusy: usage.machineBusy,
    othersBusy: othersBusy(usage),
    load: loadAverage(),
  };
}

export async function warmUp(context: BenchContext, side: Side): Promise<void> {
  const bodies = await side.newEvents(context.options.ingress.warmup);
  await runOpenLoop(
    { origin: side.url, path: WEBHOOK_PATH },
    bodies.map((b) => context.signer.sign(b)),
    { rate: 50, connections: 16, maxDurationMs: 30_000 },
  );
  // The warm-up's workflows are not part of the next run's load.
  await side.settle(20_000);
}

async function fixedRate(
  context: BenchContext,
  side: Side,
  repeat: number,
  rate: number,
  variant?: RunFigures['variant'],
): Promise<RunFigures> {
  const seconds = fixedRateSeconds(context.options, rate);
  const count = Math.round(rate * seconds);
  const deliveries = (await side.newEvents(count)).map((b) => context.signer.sign(b));
  const meter = CpuMeter.forRun(context, side.servers);
  const result = await runOpenLoop({ origin: side.url, path: WEBHOOK_PATH }, deliveries, {
    rate,
    connections: 256,
    maxDurationMs: seconds * 1000 + STRAGGLER_MS,
  });
  const run = { ...figures(side.name, repeat, rate, result, meter), ...(variant ? { variant } : {}) };
  context.log(
    `  ${side.name}${variant ? ` (${variant})` : ''} ${rate}/s: p50 ${ms(run.latency.p50)} p99 ${ms(run.latency.p99)} p99.9 ${ms(run.latency.p999)}, ${run.throughput.toFixed(0)}/s answered${run.failures ? `, failed: ${run.failures}` : ''}`,
  );
  return run;
}

/**
 * Ours and the baseline at the same rate at the same moment (the baseline's deliveries half a
 * period later), ours with its worker draining its messages: whatever the worker's load does to
 * a door's tail it does to both, so the gap between them is the ingress's own.
 */
async function sharedCores(
  context: BenchContext,
  ours: Side,
  baseline: Side,
  repeat: number,
  rate: number,
): Promise<RunFigures[]> {
  const seconds = fixedRateSeconds(context.options, rate);
  const count = Math.round(rate * seconds);
  const [oursDeliveries, baselineDeliveries] = await Promise.all(
    [ours, baseline].map(async (side) => (await side.newEvents(count)).map((b) => context.signer.sign(b))),
  );
  const meters = [ours, baseline].map((side) => CpuMeter.forRun(context, side.servers));
  const options = { rate, connections: 256, maxDurationMs: seconds * 1000 + STRAGGLER_MS };
  const halfPeriod = new Promise<void>((resolve) => setTimeout(resolve, 500 / rate));
  const [oursResult, baselineResult] = await Promise.all([
    runOpenLoop({ origin: ours.url, path: WEBHOOK_PATH }, oursDeliveries as Delivery[], options),
    halfPeriod.then(() =>
      runOpenLoop({ origin: baseline.url, path: WEBHOOK_PATH }, baselineDeliveries as Delivery[], options),
    ),
  ]);
  const runs = [
    { ...figures('ours', repeat, rate, oursResult, meters[0] as CpuMeter), variant: 'shared-cores' as const },
    { ...figures('baseline', repeat, rate, baselineResult, meters[1] as CpuMeter), variant: 'shared-cores' as const },
  ];
  context.log(
    `  ours and the baseline at ${rate}/s at once, our worker draining: p99 ${ms(runs[0]?.latency.p99 ?? Number.NaN)} vs ${ms(runs[1]?.latency.p99 ?? Number.NaN)}`,
  );
  return runs;
}

export async function search(context: BenchContext, side: Side, repeat: number, worker = true): Promise<SearchFigures> {
  const { from, factor, stepSeconds, cap } = context.options.ingress.search;
  const steps: SearchFigures['steps'] = [];
  let maxSustained = 0;
  let capped = false;
  for (let rate = from; ; rate = Math.round(rate * factor)) {
    if (rate > cap) {
      capped = true;
      break;
    }
    // At least 20 deliveries a step, so a low rate's p99 is not the one slowest of a handful.
    const deliveries = (await side.newEvents(Math.max(20, Math.round(rate * stepSeconds)))).map((b) =>
      context.signer.sign(b),
    );
    const result = await runOpenLoop({ origin: side.url, path: WEBHOOK_PATH }, deliveries, {
      rate,
      connections: 256,
      maxDurationMs: stepSeconds * 1000 + STRAGGLER_MS,
    });
    const latency = summarize(result.latencies);
    const passed = latency.p99 < P99_LIMIT_MS && result.ok === deliveries.length;
    steps.push({ rate, p99: latency.p99, throughput: result.throughput, failures: failures(result), passed });
    if (!passed) break;
    maxSustained = rate;
  }
  const label =
    side.name === 'ours' && !worker
      ? 'ours without a worker'
      : side.name === 'start-only'
        ? 'the Temporal start alone'
        : side.name;
  context.log(
    `  ${label}: max sustained ${capped ? '≥ ' : ''}${maxSustained}/s with p99 < ${P99_LIMIT_MS} ms (${steps.map((s) => `${s.rate}/s p99 ${ms(s.p99)}`).join(', ')})`,
  );
  return { side: side.name, worker, repeat, maxSustained, capped, steps };
}

async function storm(context: BenchContext, side: Side, repeat: number): Promise<StormFigures> {
  const { primed, repeatShare, concurrency, rate, seconds } = context.options.storm;
  const random = seededRandom(repeat * 7919 + (side.name === 'ours' ? 1 : 2));
  // The earlier events, delivered once each (their repeats must find them recorded).
  const originals = await side.newEvents(primed);
  await runOpenLoop(
    { origin: side.url, path: WEBHOOK_PATH },
    originals.map((b) => context.signer.sign(b)),
    { rate: 50, connections: 32, maxDurationMs: 60_000 },
  );
  // Repeats come after their originals were handled (a Svix retry comes 5 s to hours later): the
  // storm measures the duplicate path, not the worker still busy with the originals.
  if (!(await side.settle(SETTLE_TIMEOUT_MS)))
    context.log(
      `  ${side.name}: the primed events' workflows had not all finished after ${SETTLE_TIMEOUT_MS / 1000} s`,
    );

  const repeatOf = () => originals[Math.floor(random() * originals.length)] as string;
  const plan = async (count: number, share: number): Promise<Delivery[]> => {
    const fresh = await side.newEvents(Math.round(count * (1 - share)));
    let nextFresh = 0;
    return Array.from({ length: count }, () =>
      context.signer.sign(nextFresh < fresh.length && random() >= share ? (fresh[nextFresh++] as string) : repeatOf()),
    );
  };
  const closed = async (deliveries: Delivery[]) => {
    const meter = CpuMeter.forRun(context, side.servers);
    const result = await runClosedLoop({ origin: side.url, path: WEBHOOK_PATH }, deliveries, {
      concurrency,
      maxDurationMs: seconds * 1000,
    });
    return figures(side.name, repeat, Number.NaN, result, meter);
  };
  // Enough deliveries for the fastest side to stay busy for the whole run.
  const closedCount = Math.round(seconds * 4_000);
  // Warm the duplicate path's code (JIT) first, not counted: ours runs in a process started for
  // this run, while the baseline's has already served the repeat's other runs.
  await runClosedLoop({ origin: side.url, path: WEBHOOK_PATH }, await plan(2_000, 1), {
    concurrency,
    maxDurationMs: 2_000,
  });
  // The duplicate path alone first, while nothing else runs; then the mix, whose new events start workflows.
  const duplicatesOnly = await closed(await plan(closedCount, 1));
  const mixed = await closed(await plan(closedCount, repeatShare));
  const meter = CpuMeter.forRun(context, side.servers);
  const openDeliveries = await plan(rate * seconds, repeatShare);
  const open = await runOpenLoop({ origin: side.url, path: WEBHOOK_PATH }, openDeliveries, {
    rate,
    connections: 256,
    maxDurationMs: seconds * 1000 + STRAGGLER_MS,
  });
  const fixed = figures(side.name, repeat, rate, open, meter);
  context.log(
    `  ${side.name}: storm ${mixed.throughput.toFixed(0)}/s (p99 ${ms(mixed.latency.p99)}), duplicates only ${duplicatesOnly.throughput.toFixed(0)}/s (p99 ${ms(duplicatesOnly.latency.p99)}), ` +
      `at ${rate}/s p50 ${ms(fixed.latency.p50)} p99 ${ms(fixed.latency.p99)}${[mixed, duplicatesOnly, fixed].some((r) => r.failures) ? ` failed: ${[mixed.failures, duplicatesOnly.failures, fixed.failures].filter(Boolean).join(' / ')}` : ''}`,
  );
  return { side: side.name, repeat, mixed, duplicatesOnly, fixedRate: fixed };
}

export async function runIngressScenarios(
  context: BenchContext,
  what: { ingress: boolean; storm: boolean },
): Promise<IngressResults> {
  const results: IngressResults = { fixedRate: [], search: [], storm: [] };
  const { repeats } = context.options;
  for (let repeat = 0; repeat < repeats; repeat++) {
    // Every repeat on a clean Temporal server: the previous one's abandoned workflows stay behind.
    if (repeat > 0) await context.env.freshTemporal();
    for (const name of sidesInOrder(repeat)) {
      context.log(`ingress repeat ${repeat + 1}/${repeats}: ${name}`);
      if (name === 'baseline') {
        // One baseline process serves the whole repeat: it keeps no backlog between runs.
        const side = await startBaselineSide(context);
        try {
          await warmUp(context, side);
          if (what.ingress)
            for (const rate of context.options.ingress.rates)
              results.fixedRate.push(await fixedRate(context, side, repeat, rate));
          if (what.ingress) results.search.push(await search(context, side, repeat));
          if (what.storm) results.storm.push(await storm(context, side, repeat));
        } finally {
          await side.stop();
        }
        continue;
      }
      // Ours: a fresh API, worker and task queue for each run, so no run inherits a backlog.
      const runs: Array<{ worker: boolean; env?: Record<string, string>; run: (side: Side) => Promise<void> }> = [];
      if (what.ingress) {
        for (const rate of context.options.ingress.rates)
          runs.push({
            worker: true,
            run: async (side) => void results.fixedRate.push(await fixedRate(context, side, repeat, rate)),
          });
        // The worker at the API's own CPU priority: what its default WORKER_NICE=10 buys the door.
        const [rate] = context.options.ingress.rates;
        runs.push({
          worker: true,
          env: { WORKER_NICE: '0' },
          run: async (side) =>
            void results.fixedRate.push(await fixedRate(context, side, repeat, rate, 'equal-priority')),
        });
        // And beside the baseline, both under that worker's load at once.
        runs.push({
          worker: true,
          run: async (side) => {
            const baseline = await startBaselineSide(context);
            try {
              await warmUp(context, baseline);
              results.fixedRate.push(...(await sharedCores(context, side, baseline, repeat, rate)));
            } finally {
              await baseline.stop();
            }
          },
        });
        runs.push({ worker: true, run: async (side) => void results.search.push(await search(context, side, repeat)) });
        // The ingress's own ceiling: the same search with no worker competing for the cores.
        runs.push({
          worker: false,
          run: async (side) => void results.search.push(await search(context, side, repeat, false)),
        });
      }
      if (what.storm)
        runs.push({ worker: true, run: async (side) => void results.storm.push(await storm(context, side, repeat)) });
      for (const { worker, env, run } of runs) {
        const side = await startOurSide(context, { worker, env });
        try {
          await warmUp(context, side);
          await run(side);
        } finally {
          await side.stop();
        }
      }
      if (what.ingress) {
        // Right after ours without a worker, on the same server: the start alone, for its ceiling.
        const side = await startStartOnlySide(context);
        try {
          await warmUp(context, side);
          results.search.push(await search(context, side, repeat, false));
        } finally {
          await side.stop();
        }
      }
    }
  }
  return results;
}

export const ms = (value: number): string =>
  Number.isFinite(value) ? `${value < 10 ? value.toFixed(1) : value.toFixed(0)} ms` : '—';

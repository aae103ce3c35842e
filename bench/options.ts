/**
 * `npm run bench [-- options]`:
 *
 *   --quick            a smoke run (~3 minutes here): one repeat, shorter runs, fewer messages
 *   --repeats N        repeats of the ingress and operation-store scenarios (default 3; quick 1)
 *   --e2e-repeats N    repeats of each end-to-end load (default 2: the 1,000-message drain takes
 *                      over a minute on a 2-core machine; quick 1)
 *   --only a,b         run only these scenarios: ingress, storm, e2e, store, intake, threads,
 *                      rehearsal, long-email
 *   --profile          also write V8 CPU profiles (node --cpu-prof) of the API, the worker and the
 *                      baseline for one extra run of each, and summarize them in the report
 *   --runtime tsx      run the servers from TypeScript with tsx instead of the compiled JavaScript
 *   --temporal stack   run against Temporal's own server on Postgres with mTLS (`npm run stack`'s,
 *                      scripts/services/temporal-stack.ts) instead of the dev server; its state is
 *                      kept across repeats (a fresh one per repeat would rebuild the databases)
 *   --temporal both    start both and compare them side by side in this run (the `servers`
 *                      scenario, the default with it): the start rate alone and ours with its
 *                      worker, and the end-to-end runs at 1×, 4× and 16×, on each server in turn;
 *                      other scenarios named with --only run on the dev server
 */

export const SCENARIOS = [
  'ingress',
  'storm',
  'e2e',
  'store',
  'intake',
  'threads',
  'rehearsal',
  'long-email',
  'servers',
] as const;
/** What a run without --only does: everything but `servers`, which needs --temporal both (and is all it does by default). */
export type Scenario = (typeof SCENARIOS)[number];
const DEFAULT_SCENARIOS: Scenario[] = SCENARIOS.filter((scenario) => scenario !== 'servers');

export interface BenchOptions {
  quick: boolean;
  repeats: number;
  e2eRepeats: number;
  only: Set<Scenario>;
  profile: boolean;
  runtime: 'dist' | 'tsx';
  temporal: 'dev' | 'stack' | 'both';
  ingress: {
    /** Webhooks per second at 1×, 4× and 16× load. 4× is the target rate (200/s). */
    rates: [number, number, number];
    /** Length of each fixed-rate run, at least (see minDeliveries). */
    seconds: number;
    /**
     * Deliveries a fixed-rate run sends at least, so its p99 is not the second-slowest of a
     * handful: at 50/s a 2.5 s run has 125 samples, and one stall decides its "p99".
     */
    minDeliveries: number;
    /** The max-sustained search: start rate, growth per step, length of a step, highest rate tried. */
    search: { from: number; factor: number; stepSeconds: number; cap: number };
    /** Deliveries before a measurement that are not counted (JIT, connection pools, Temporal's connection). */
    warmup: number;
  };
  storm: {
    /** Events delivered once before the storm: the storm's repeats are drawn from them. */
    primed: number;
    /** Share of the storm's deliveries that repeat an earlier event. */
    repeatShare: number;
    /** Closed-loop senders for the throughput figure. */
    concurrency: number;
    /** Fixed rate for the latency figures. */
    rate: number;
    seconds: number;
  };
  e2e: {
    /** Messages at 1×, 4× and 16× load; 16× is the 1,000. */
    messages: [number, number, number];
    /** The messages' first deliveries are spread over this window (so load is messages per window). */
    windowSeconds: number;
    deliveriesPerMessage: number;
    /** Each delivery of a message comes this long after the message's arrival, at most (uniformly drawn). */
    maxDelayMs: number;
    /** A load that has not drained by then fails the bench. */
    drainTimeoutMs: number;
  };
  store: { operations: number; concurrency: number };
  /** Conversations (bench/scenarios/threads.ts): bursts in many threads, each message delivered three times. */
  threads: {
    threads: number;
    messagesPerThread: number;
    /** A thread's messages arrive this far apart. */
    spacingMs: number;
    /** The threads' first messages are spread over this window. */
    windowSeconds: number;
    /** Each delivery of a message comes this long after it, at most (uniformly drawn): out of order. */
    maxDelayMs: number;
    /** REPLY_COALESCE_MS for the run: longer than a burst (4 s) plus the deliveries' delay. */
    coalesceMs: number;
    drainTimeoutMs: number;
  };
  /**
   * A rehearsal beside the live drain (bench/scenarios/rehearsal.ts): this many past messages of one
   * inbox, drained live and rehearsed in each of --e2e-repeats repeats, the order alternating.
   */
  rehearsal: {
    messages: number;
    /** `npm run rehearse --concurrency`: its default, what an operator gets. */
    concurrency: number;
    /** Each side's run fails past this (longer than the end-to-end drain's: all the messages are one inbox's). */
    timeoutMs: number;
  };
  /**
   * One long email beside ordinary mail (bench/scenarios/long-email.ts, issue 39): `repeats` pairs
   * of runs, the ordinary messages alone and with the long email among them.
   */
  longEmail: {
    /** Ordinary messages per run (the 200), each a question the bundled help centre answers. */
    messages: number;
    /** Lines of the long email (the 5,000), each a different question. */
    lines: number;
    /** The ordinary messages' deliveries are spread over this window. */
    windowSeconds: number;
    /** The long email is delivered this far into the window (0..1): early, so its work overlaps most of theirs. */
    longEmailAtShare: number;
    drainTimeoutMs: number;
  };
  intake: {
    /** Messages `npm run replay` hands over in the catch-up scenario (the 2,000). */
    catchUpMessages: number;
    /** Webhooks per second while Temporal is unreachable, and for how long it is. */
    outageRate: number;
    outageSeconds: number;
  };
}

/** How long a fixed-rate run at `rate` lasts: its configured length, or longer for enough samples. */
export function fixedRateSeconds(options: BenchOptions, rate: number): number {
  return Math.max(options.ingress.seconds, options.ingress.minDeliveries / rate);
}

export function parseOptions(argv: string[]): BenchOptions {
  const flag = (name: string) => argv.includes(name);
  const value = (name: string): string | undefined => {
    const at = argv.indexOf(name);
    if (at === -1) return undefined;
    const next = argv[at + 1];
    if (next === undefined || next.startsWith('--')) throw new Error(`${name} needs a value`);
    return next;
  };
  const known = new Set(['--quick', '--repeats', '--e2e-repeats', '--only', '--profile', '--runtime', '--temporal']);
  for (const arg of argv) {
    if (arg.startsWith('--') && !known.has(arg)) throw new Error(`unknown option ${arg} (see bench/options.ts)`);
  }
  const positive = (name: string, fallback: number) => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
    return n;
  };
  const quick = flag('--quick');
  const runtime = value('--runtime') ?? 'dist';
  if (runtime !== 'dist' && runtime !== 'tsx') throw new Error('--runtime must be dist or tsx');
  const temporal = value('--temporal') ?? 'dev';
  if (temporal !== 'dev' && temporal !== 'stack' && temporal !== 'both')
    throw new Error('--temporal must be dev, stack or both');
  const only = value('--only');
  const scenarios = only ? only.split(',').map((s) => s.trim()) : temporal === 'both' ? ['servers'] : DEFAULT_SCENARIOS;
  for (const s of scenarios)
    if (!(SCENARIOS as readonly string[]).includes(s))
      throw new Error(`--only: unknown scenario ${s} (${SCENARIOS.join(', ')})`);
  if (scenarios.includes('servers') && temporal !== 'both')
    throw new Error('the servers scenario compares the dev server with Temporal on Postgres: add --temporal both');

  return {
    quick,
    repeats: positive('--repeats', quick ? 1 : 3),
    e2eRepeats: positive('--e2e-repeats', quick ? 1 : 2),
    only: new Set(scenarios as Scenario[]),
    profile: flag('--profile'),
    runtime,
    temporal,
    ingress: {
      rates: [50, 200, 800],
      seconds: quick ? 1 : 2.5,
      minDeliveries: quick ? 100 : 500,
      search: { from: 5, factor: 1.5, stepSeconds: quick ? 1 : 1.2, cap: quick ? 1_000 : 3_000 },
      warmup: 30,
    },
    storm: { primed: quick ? 50 : 100, repeatShare: 0.9, concurrency: 32, rate: 400, seconds: quick ? 1 : 2.5 },
    e2e: {
      messages: quick ? [6, 24, 96] : [62, 250, 1_000],
      windowSeconds: quick ? 4 : 10,
      deliveriesPerMessage: 3,
      maxDelayMs: 2_000,
      drainTimeoutMs: quick ? 90_000 : 240_000,
    },
    store: { operations: quick ? 500 : 1_000, concurrency: 8 },
    threads: {
      threads: quick ? 20 : 100,
      messagesPerThread: 5,
      spacingMs: 1_000,
      windowSeconds: quick ? 4 : 10,
      maxDelayMs: 2_000,
      coalesceMs: 5_000,
      drainTimeoutMs: quick ? 90_000 : 240_000,
    },
    rehearsal: { messages: quick ? 100 : 1_000, concurrency: 4, timeoutMs: quick ? 180_000 : 900_000 },
    // The same 200 and 5,000 in a quick run: the figure is about one email among the 200. At
    // 5/s: each ordinary message is retrieved and drafted from the help centre, and at 20/s (10 s)
    // this shared 2-core machine fell minutes behind, so the p99 measured the backlog, not the email.
    longEmail: { messages: 200, lines: 5_000, windowSeconds: 40, longEmailAtShare: 0.1, drainTimeoutMs: 180_000 },
    intake: { catchUpMessages: quick ? 200 : 2_000, outageRate: 20, outageSeconds: quick ? 10 : 60 },
  };
}

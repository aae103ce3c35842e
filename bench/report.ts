import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fixedRateSeconds, type BenchOptions } from './options';
import type { RehearsalFigures, RehearsalRun } from './scenarios/rehearsal';
import type { ThreadsFigures } from './scenarios/threads';
import type { EndToEndFigures } from './scenarios/end-to-end';
import type { IngressResults, RunFigures } from './scenarios/ingress';
import type { IntakeFigures } from './scenarios/intake';
import type { LongEmailFigures } from './scenarios/long-email';
import type { StoreFigures } from './scenarios/operation-store';
import type { ServerFigures, ServerKind } from './scenarios/temporal-servers';
import type { ProfileSummary } from './support/profile';
import { median, ratio } from './support/stats';

/**
 * Turns the runs into the published figures: medians over repeats, ours and the baseline side
 * by side with their ratio, the 1×/4×/16× curves, the targets met or missed, and the machine and
 * its load at the time. Written as Markdown and JSON under bench/results/.
 */

export interface MachineInfo {
  cpus: string;
  cores: number;
  memoryGiB: number;
  node: string;
  temporal: string;
  postgres: string;
  commit: string;
  runtime: string;
  loadAtStart: [number, number, number];
  loadAtEnd: [number, number, number];
}

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  options: BenchOptions;
  machine: MachineInfo;
  ingress?: IngressResults;
  endToEnd?: EndToEndFigures[];
  store?: StoreFigures[];
  intake?: IntakeFigures;
  threads?: ThreadsFigures;
  rehearsal?: RehearsalFigures;
  longEmail?: LongEmailFigures;
  servers?: ServerFigures[];
  profiles?: ProfileSummary[];
  failures: string[];
}

export interface Target {
  name: string;
  goal: string;
  measured: string;
  met: boolean | null;
}

const f1 = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : '—');
const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '—');
const msText = (v: number) => (Number.isFinite(v) ? `${f1(v)} ms` : '—');

function medians(runs: RunFigures[]) {
  const cpuNames = [...new Set(runs.flatMap((r) => Object.keys(r.cpuMs)))];
  return {
    runs: runs.length,
    p50: median(runs.map((r) => r.latency.p50)),
    p99: median(runs.map((r) => r.latency.p99)),
    p999: median(runs.map((r) => r.latency.p999)),
    throughput: median(runs.map((r) => r.throughput)),
    failed: runs.filter((r) => r.failures).map((r) => r.failures),
    cpuMs: Object.fromEntries(
      cpuNames.map((n) => [n, median(runs.map((r) => r.cpuMs[n] ?? Number.NaN).filter((v) => v >= 0))]),
    ),
    machineBusy: median(runs.map((r) => r.machineBusy)),
  };
}

export type Medians = ReturnType<typeof medians>;

export interface Summary {
  ingress: Array<{ rate: number; load: string; ours: Medians; baseline: Medians; p50Ratio: number; p99Ratio: number }>;
  /** Ours at the 1× rate with its worker at the API's CPU priority (WORKER_NICE=0), same repeats. */
  equalPriority?: { rate: number; ours: Medians };
  /** Ours and the baseline at the 1× rate at the same moment, our worker draining ours. */
  sharedCores?: { rate: number; ours: Medians; baseline: Medians };
  search?: {
    ours: number;
    baseline: number;
    ingressAlone: number;
    oursCapped: boolean;
    baselineCapped: boolean;
    ratio: number;
    oursRuns: number[];
    baselineRuns: number[];
    ingressAloneRuns: number[];
    /** The Temporal start alone (no signature, no database, no worker): the server's ceiling. */
    startOnly: number;
    startOnlyRuns: number[];
  };
  storm?: {
    mixed: { ours: Medians; baseline: Medians; ratio: number };
    duplicatesOnly: { ours: Medians; baseline: Medians; ratio: number; p99Ratio: number };
    fixedRate: { rate: number; ours: Medians; baseline: Medians; p50Ratio: number; p99Ratio: number };
  };
  endToEnd: Array<{
    load: string;
    messages: number;
    runs: number;
    drainSeconds: number;
    throughput: number;
    p50: number;
    p99: number;
    ackP99: number;
    replies: number;
    expectedReplies: number;
    duplicateEmails: number;
    missingReplies: number;
    cpuMsPerMessage: Record<string, number>;
  }>;
  store: Array<{ kind: string; throughput: number; p50: number; p99: number }>;
  /** `--temporal both`: the dev server and Temporal on Postgres, side by side (medians over repeats). */
  servers?: Record<ServerKind, ServerSummary>;
  storeOverhead?: { p50Ratio: number; throughputRatio: number; extraMsP50: number };
  longEmail?: LongEmailSummary;
  targets: Target[];
}

/** The long-email scenario: the ordinary messages' latency alone and beside the long email (medians over repeats). */
export interface LongEmailSummary {
  messages: number;
  lines: number;
  windowSeconds: number;
  repeats: number;
  alone: { p50: number; p99: number };
  withLongEmail: { p50: number; p99: number };
  /** Median p99 with the long email ÷ median p99 alone (< 1.1: the issue's target). */
  p99Ratio: number;
  p50Ratio: number;
  /** Each repeat's own p99 ratio (with ÷ alone, the two runs of one repeat). */
  p99RatiosByRepeat: number[];
  /**
   * The CPU the bench's own processes spent on a whole run (every message), median with ÷ median
   * alone: what the long email cost, less sensitive than latency to a busy neighbour on shared cores.
   */
  cpuRatio: number;
  longEmail: { statuses: string[]; emails: number[]; seconds: number; webhookBytes: number };
  missingReplies: number;
  duplicateEmails: number;
}

/** CPU seconds of every process of the bench over one long-email run (its per-message figures × its messages). */
const runCpuSeconds = (run: LongEmailFigures['runs'][number]) =>
  (Object.values(run.cpuMsPerMessage).reduce((sum, ms) => sum + (Number.isFinite(ms) ? ms : 0), 0) *
    (run.messages + (run.longEmail ? 1 : 0))) /
  1000;

function longEmailSummary(figures: LongEmailFigures): LongEmailSummary {
  const alone = figures.runs.filter((r) => !r.withLongEmail);
  const withIt = figures.runs.filter((r) => r.withLongEmail);
  const medianOf = (runs: typeof alone, pick: (r: (typeof alone)[number]) => number) => median(runs.map(pick));
  const repeats = [...new Set(figures.runs.map((r) => r.repeat))];
  const longRuns = withIt.flatMap((r) => (r.longEmail ? [r.longEmail] : []));
  const aloneP99 = medianOf(alone, (r) => r.latency.p99);
  const withP99 = medianOf(withIt, (r) => r.latency.p99);
  return {
    messages: figures.messages,
    lines: figures.lines,
    windowSeconds: figures.windowSeconds,
    repeats: repeats.length,
    alone: { p50: medianOf(alone, (r) => r.latency.p50), p99: aloneP99 },
    withLongEmail: { p50: medianOf(withIt, (r) => r.latency.p50), p99: withP99 },
    p99Ratio: ratio(withP99, aloneP99),
    p50Ratio: ratio(
      medianOf(withIt, (r) => r.latency.p50),
      medianOf(alone, (r) => r.latency.p50),
    ),
    p99RatiosByRepeat: repeats.map((repeat) =>
      ratio(
        withIt.find((r) => r.repeat === repeat)?.latency.p99 ?? Number.NaN,
        alone.find((r) => r.repeat === repeat)?.latency.p99 ?? Number.NaN,
      ),
    ),
    cpuRatio: ratio(median(withIt.map(runCpuSeconds)), median(alone.map(runCpuSeconds))),
    longEmail: {
      statuses: longRuns.map((l) => l.status),
      emails: longRuns.map((l) => l.emails),
      seconds: median(longRuns.map((l) => l.seconds)),
      webhookBytes: longRuns[0]?.webhookBytes ?? Number.NaN,
    },
    missingReplies: figures.runs.reduce((n, r) => n + r.missingReplies, 0),
    duplicateEmails: figures.runs.reduce((n, r) => n + r.duplicateEmails, 0),
  };
}

export interface ServerSummary {
  runs: number;
  startOnly: { median: number; runs: number[]; capped: boolean };
  ours: { median: number; runs: number[]; capped: boolean };
  endToEnd: Array<{
    load: string;
    messages: number;
    p50: number;
    p99: number;
    drainSeconds: number;
    throughput: number;
    replies: number;
    expectedReplies: number;
    duplicateEmails: number;
    /** CPU ms per message of the Temporal server (and, on the stack, its Postgres backends). */
    temporalCpuMs: number;
  }>;
}

function serverSummary(runs: ServerFigures[]): ServerSummary {
  const ladder = (pick: (r: ServerFigures) => ServerFigures['ours']) => ({
    median: median(runs.map((r) => pick(r).maxSustained)),
    runs: runs.map((r) => pick(r).maxSustained),
    capped: runs.some((r) => pick(r).capped),
  });
  const loads = [...new Set(runs.flatMap((r) => r.endToEnd.map((e) => e.load)))];
  return {
    runs: runs.length,
    startOnly: ladder((r) => r.startOnly),
    ours: ladder((r) => r.ours),
    endToEnd: loads.map((load) => {
      const of = runs.flatMap((r) => r.endToEnd.filter((e) => e.load === load));
      return {
        load,
        messages: of[0]?.messages ?? 0,
        p50: median(of.map((e) => e.latency.p50)),
        p99: median(of.map((e) => e.latency.p99)),
        drainSeconds: median(of.map((e) => e.drainSeconds)),
        throughput: median(of.map((e) => e.throughput)),
        replies: of.reduce((n, e) => n + e.replies, 0),
        expectedReplies: of.reduce((n, e) => n + e.messages, 0),
        duplicateEmails: of.reduce((n, e) => n + e.duplicateEmails, 0),
        temporalCpuMs: median(
          of.map((e) => (e.cpuMsPerMessage.temporal ?? 0) + (e.cpuMsPerMessage['temporal postgres'] ?? 0)),
        ),
      };
    }),
  };
}

const LOADS = ['1×', '4×', '16×'];

export function summarizeResults(results: BenchResults): Summary {
  const summary: Summary = { ingress: [], endToEnd: [], store: [], targets: [] };
  const ingress = results.ingress;
  if (ingress && ingress.fixedRate.length) {
    results.options.ingress.rates.forEach((rate, i) => {
      const ours = medians(ingress.fixedRate.filter((r) => r.side === 'ours' && !r.variant && r.offered === rate));
      const baseline = medians(
        ingress.fixedRate.filter((r) => r.side === 'baseline' && !r.variant && r.offered === rate),
      );
      // Speed ratios: baseline latency / our latency (≥ 1: ours at least as fast).
      summary.ingress.push({
        rate,
        load: LOADS[i] ?? '',
        ours,
        baseline,
        p50Ratio: ratio(baseline.p50, ours.p50),
        p99Ratio: ratio(baseline.p99, ours.p99),
      });
    });
  }
  const equal = ingress?.fixedRate.filter((r) => r.variant === 'equal-priority') ?? [];
  if (equal.length) summary.equalPriority = { rate: equal[0]?.offered ?? Number.NaN, ours: medians(equal) };
  const shared = ingress?.fixedRate.filter((r) => r.variant === 'shared-cores') ?? [];
  if (shared.length)
    summary.sharedCores = {
      rate: shared[0]?.offered ?? Number.NaN,
      ours: medians(shared.filter((r) => r.side === 'ours')),
      baseline: medians(shared.filter((r) => r.side === 'baseline')),
    };
  if (ingress && ingress.search.length) {
    const of = (side: string, worker = true) =>
      ingress.search.filter((s) => s.side === side && (s.worker ?? true) === worker);
    const oursRuns = of('ours').map((s) => s.maxSustained);
    const baselineRuns = of('baseline').map((s) => s.maxSustained);
    const ingressAloneRuns = of('ours', false).map((s) => s.maxSustained);
    const startOnlyRuns = of('start-only', false).map((s) => s.maxSustained);
    summary.search = {
      startOnly: median(startOnlyRuns),
      startOnlyRuns,
      ours: median(oursRuns),
      baseline: median(baselineRuns),
      ingressAlone: median(ingressAloneRuns),
      ingressAloneRuns,
      oursCapped: of('ours').some((s) => s.capped),
      baselineCapped: of('baseline').some((s) => s.capped),
      ratio: ratio(median(oursRuns), median(baselineRuns)),
      oursRuns,
      baselineRuns,
    };
  }
  if (ingress && ingress.storm.length) {
    const of = (side: string, pick: (s: IngressResults['storm'][number]) => RunFigures) =>
      medians(ingress.storm.filter((s) => s.side === side).map(pick));
    const mixed = { ours: of('ours', (s) => s.mixed), baseline: of('baseline', (s) => s.mixed) };
    const dups = { ours: of('ours', (s) => s.duplicatesOnly), baseline: of('baseline', (s) => s.duplicatesOnly) };
    const fixed = { ours: of('ours', (s) => s.fixedRate), baseline: of('baseline', (s) => s.fixedRate) };
    summary.storm = {
      mixed: { ...mixed, ratio: ratio(mixed.ours.throughput, mixed.baseline.throughput) },
      duplicatesOnly: {
        ...dups,
        ratio: ratio(dups.ours.throughput, dups.baseline.throughput),
        p99Ratio: ratio(dups.baseline.p99, dups.ours.p99),
      },
      fixedRate: {
        rate: results.options.storm.rate,
        ...fixed,
        p50Ratio: ratio(fixed.baseline.p50, fixed.ours.p50),
        p99Ratio: ratio(fixed.baseline.p99, fixed.ours.p99),
      },
    };
  }
  for (const load of LOADS) {
    const runs = (results.endToEnd ?? []).filter((r) => r.load === load);
    if (runs.length === 0) continue;
    const cpuNames = [...new Set(runs.flatMap((r) => Object.keys(r.cpuMsPerMessage)))];
    summary.endToEnd.push({
      load,
      messages: runs[0]?.messages ?? 0,
      runs: runs.length,
      drainSeconds: median(runs.map((r) => r.drainSeconds)),
      throughput: median(runs.map((r) => r.throughput)),
      p50: median(runs.map((r) => r.latency.p50)),
      p99: median(runs.map((r) => r.latency.p99)),
      ackP99: median(runs.map((r) => r.ack.p99)),
      replies: runs.reduce((n, r) => n + r.replies, 0),
      expectedReplies: runs.reduce((n, r) => n + r.messages, 0),
      duplicateEmails: runs.reduce((n, r) => n + r.duplicateEmails, 0),
      missingReplies: runs.reduce((n, r) => n + r.missingReplies, 0),
      cpuMsPerMessage: Object.fromEntries(
        cpuNames.map((n) => [n, median(runs.map((r) => r.cpuMsPerMessage[n] ?? Number.NaN).filter((v) => v >= 0))]),
      ),
    });
  }
  for (const kind of ['claim+complete', 'replay', 'bare insert']) {
    const runs = (results.store ?? []).filter((r) => r.kind === kind);
    if (runs.length)
      summary.store.push({
        kind,
        throughput: median(runs.map((r) => r.throughput)),
        p50: median(runs.map((r) => r.latency.p50)),
        p99: median(runs.map((r) => r.latency.p99)),
      });
  }
  const claim = summary.store.find((s) => s.kind === 'claim+complete');
  const bare = summary.store.find((s) => s.kind === 'bare insert');
  if (claim && bare)
    summary.storeOverhead = {
      p50Ratio: ratio(claim.p50, bare.p50),
      throughputRatio: ratio(bare.throughput, claim.throughput),
      extraMsP50: claim.p50 - bare.p50,
    };

  if (results.servers?.length)
    summary.servers = {
      dev: serverSummary(results.servers.filter((s) => s.server === 'dev')),
      stack: serverSummary(results.servers.filter((s) => s.server === 'stack')),
    };

  // The issue's targets: reported, never asserted in tests.
  const dups = summary.storm?.duplicatesOnly;
  summary.targets.push({
    name: 'duplicate path at least as fast as the baseline',
    goal: 'throughput ratio ours/baseline ≥ 1.0 (repeats only, closed loop)',
    measured: dups
      ? `${f2(dups.ratio)} (${f1(dups.ours.throughput)}/s vs ${f1(dups.baseline.throughput)}/s; p99 ${msText(dups.ours.p99)} vs ${msText(dups.baseline.p99)})`
      : 'not run',
    met: dups ? dups.ratio >= 1 : null,
  });
  const at50 = summary.ingress.find((r) => r.rate === 50);
  summary.targets.push({
    name: 'new messages at 50/s with the worker on the same cores: ack p99 ≤ 25 ms',
    goal: 'p99 ≤ 25 ms, every delivery 2xx',
    measured: at50
      ? `p99 ${msText(at50.ours.p99)} (baseline without a worker ${msText(at50.baseline.p99)}` +
        `${summary.sharedCores ? `; both at once under the worker's load: ours ${msText(summary.sharedCores.ours.p99)}, baseline ${msText(summary.sharedCores.baseline.p99)}` : ''}` +
        `${summary.equalPriority ? `; worker at equal priority ${msText(summary.equalPriority.ours.p99)}` : ''})`
      : 'not run',
    met: at50 ? at50.ours.p99 <= 25 && at50.ours.failed.length === 0 : null,
  });
  const at200 = summary.ingress.find((r) => r.rate === 200);
  summary.targets.push({
    name: 'unique messages: p99 ack under 100 ms at 200 webhooks/s',
    goal: 'p99 < 100 ms, every delivery 2xx',
    measured: at200
      ? `p99 ${msText(at200.ours.p99)} (baseline ${msText(at200.baseline.p99)}), ${f1(at200.ours.throughput)}/s answered${at200.ours.failed.length ? `, failures in ${at200.ours.failed.length} runs` : ''}`
      : 'not run',
    met: at200 ? at200.ours.p99 < 100 && at200.ours.failed.length === 0 : null,
  });
  if (results.longEmail?.runs.length) {
    const l = (summary.longEmail = longEmailSummary(results.longEmail));
    summary.targets.push({
      name: `a ${l.lines.toLocaleString('en-GB')}-line email beside ${l.messages} ordinary ones changes their p99 time-to-reply by less than 10 %`,
      goal: 'median p99 with it ÷ median p99 alone < 1.10; every message answered once',
      measured: `${f2(l.p99Ratio)} (p99 ${msText(l.withLongEmail.p99)} with it, ${msText(l.alone.p99)} alone; by repeat ${l.p99RatiosByRepeat.map(f2).join(', ')}), missing ${l.missingReplies}, duplicates ${l.duplicateEmails}`,
      met: l.p99Ratio < 1.1 && l.missingReplies === 0 && l.duplicateEmails === 0,
    });
  }
  for (const e2e of summary.endToEnd) {
    summary.targets.push({
      name: `end to end at ${e2e.load} (${e2e.messages} messages): p50 under 500 ms, zero duplicates`,
      goal: 'p50 < 500 ms; replies == messages; duplicate emails == 0',
      measured: `p50 ${msText(e2e.p50)}, p99 ${msText(e2e.p99)}, replies ${e2e.replies}/${e2e.expectedReplies}, duplicates ${e2e.duplicateEmails}`,
      met: e2e.p50 < 500 && e2e.duplicateEmails === 0 && e2e.missingReplies === 0,
    });
  }
  return summary;
}

// --- Markdown --------------------------------------------------------------------------------

/** The 1-minute load average over a scenario's runs, as `low–high`. */
function loadRange(values: number[]): string {
  const finite = values.filter(Number.isFinite);
  return finite.length ? `${Math.min(...finite).toFixed(1)}–${Math.max(...finite).toFixed(1)}` : '—';
}

/** The median share of the machine other processes kept busy during a scenario's runs. */
function othersText(values: Array<number | undefined>): string {
  const share = median(values.filter((v): v is number => typeof v === 'number'));
  return Number.isFinite(share) ? `${Math.round(share * 100)} % of the machine` : 'not measured';
}

const table = (header: string[], rows: string[][]) =>
  [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

const cpuText = (cpu: Record<string, number>) =>
  Object.entries(cpu)
    .filter(([, v]) => Number.isFinite(v))
    .map(([k, v]) => `${k} ${f1(v)}`)
    .join(', ');

export function markdown(results: BenchResults, summary: Summary): string {
  const m = results.machine;
  const o = results.options;
  const lines: string[] = [];
  lines.push(`# replyonce benchmark — ${results.startedAt}`, '');
  lines.push(
    `Machine: ${m.cores} × ${m.cpus}, ${m.memoryGiB} GiB; Node ${m.node}; Temporal ${m.temporal}; PostgreSQL ${m.postgres}; ` +
      `commit ${m.commit}; servers run as ${m.runtime}. Load average (1/5/15 min) at start ${m.loadAtStart.join(' / ')}, at end ${m.loadAtEnd.join(' / ')}.`,
    '',
    `While the bench ran, processes outside it (other users' work on this shared machine) kept ${othersText([
      ...(results.ingress?.fixedRate ?? []).map((r) => r.othersBusy),
      ...(results.ingress?.storm ?? []).flatMap((s) => [
        s.mixed.othersBusy,
        s.duplicatesOnly.othersBusy,
        s.fixedRate.othersBusy,
      ]),
      ...(results.endToEnd ?? []).map((r) => r.othersBusy),
    ])} busy (median over runs).`,
    '',
    `Every figure is the median of ${o.repeats} repeats (end to end: ${o.e2eRepeats}); ours and the baseline run in the same repeat, in alternating order. ` +
      "Speed ratios are baseline latency ÷ our latency and our throughput ÷ the baseline's: **≥ 1 means ours is at least as fast**. " +
      'All processes share the same 2 cores: the load generator, the servers under test, the Temporal dev server, Postgres and the sandbox (CPU ms per request below say who spent what).',
    '',
  );
  lines.push(
    '## Targets',
    '',
    table(
      ['target', 'goal', 'measured (median)', 'met'],
      summary.targets.map((t) => [t.name, t.goal, t.measured, t.met === null ? '—' : t.met ? 'yes' : '**no**']),
    ),
    '',
  );
  if (results.failures.length) lines.push('## Failures', '', ...results.failures.map((f) => `- ${f}`), '');

  if (summary.ingress.length) {
    lines.push(
      '## 1. Ingress, unique messages (fixed rate, open loop)',
      '',
      `Each rate for ${o.ingress.seconds} s, or long enough for ${o.ingress.minDeliveries} deliveries (${o.ingress.rates.map((r) => `${r}/s: ${f1(fixedRateSeconds(o, r))} s`).join(', ')}), after a warm-up; latency from when each delivery was due to its answer. Ours starts one Temporal workflow per delivery, with the worker running and processing them (as in production). ` +
        `Load average (1 min, the bench's own processes included) during these runs: ${loadRange((results.ingress?.fixedRate ?? []).map((r) => r.load[0]))}; ` +
        `other processes on the machine used ${othersText((results.ingress?.fixedRate ?? []).map((r) => r.othersBusy))} (median).`,
      '',
      table(
        [
          'load',
          'rate',
          'ours p50 / p99 / p99.9',
          'baseline p50 / p99 / p99.9',
          'speed ratio p50 / p99',
          'ours answered/s',
          'ours CPU ms per request',
          'baseline CPU ms per request',
        ],
        summary.ingress.map((r) => [
          r.load,
          `${r.rate}/s`,
          `${msText(r.ours.p50)} / ${msText(r.ours.p99)} / ${msText(r.ours.p999)}${r.ours.failed.length ? ` (failures: ${r.ours.failed.join('; ')})` : ''}`,
          `${msText(r.baseline.p50)} / ${msText(r.baseline.p99)} / ${msText(r.baseline.p999)}${r.baseline.failed.length ? ` (failures: ${r.baseline.failed.join('; ')})` : ''}`,
          `${f2(r.p50Ratio)} / ${f2(r.p99Ratio)}`,
          f1(r.ours.throughput),
          cpuText(r.ours.cpuMs),
          cpuText(r.baseline.cpuMs),
        ]),
      ),
      '',
      ...(summary.equalPriority
        ? [
            `Ours at ${summary.equalPriority.rate}/s with its worker at the API's CPU priority (WORKER_NICE=0; the default is 10), in the same repeats: ` +
              `p50 / p99 / p99.9 ${msText(summary.equalPriority.ours.p50)} / ${msText(summary.equalPriority.ours.p99)} / ${msText(summary.equalPriority.ours.p999)}.`,
            '',
          ]
        : []),
      ...(summary.sharedCores
        ? [
            `Ours and the baseline at ${summary.sharedCores.rate}/s **at the same moment**, while our worker drains ours (both doors under the same contention): ` +
              `ours p50 / p99 / p99.9 ${msText(summary.sharedCores.ours.p50)} / ${msText(summary.sharedCores.ours.p99)} / ${msText(summary.sharedCores.ours.p999)}, ` +
              `the baseline ${msText(summary.sharedCores.baseline.p50)} / ${msText(summary.sharedCores.baseline.p99)} / ${msText(summary.sharedCores.baseline.p999)}.`,
            '',
          ]
        : []),
    );
  }
  if (summary.search) {
    const s = summary.search;
    lines.push(
      '### Max sustained rate with p99 ack < 100 ms',
      '',
      `Rates from ${o.ingress.search.from}/s up by ×${o.ingress.search.factor}, ${o.ingress.search.stepSeconds} s each, until p99 ≥ 100 ms or a delivery is not answered 2xx (highest tried: ${o.ingress.search.cap}/s).`,
      '',
      table(
        ['side', 'max sustained (median)', 'per repeat'],
        [
          [
            'ours (with its worker, as in production)',
            `${s.oursCapped ? '≥ ' : ''}${f1(s.ours)}/s`,
            s.oursRuns.join(', '),
          ],
          [
            'ours, ingress alone (no worker: workflows only queue)',
            `${f1(s.ingressAlone)}/s`,
            s.ingressAloneRuns.join(', '),
          ],
          ...(s.startOnlyRuns.length
            ? [
                [
                  'the Temporal start alone (no signature, no database, no worker; bench/baseline/start-only.ts)',
                  `${f1(s.startOnly)}/s`,
                  s.startOnlyRuns.join(', '),
                ],
              ]
            : []),
          ['baseline', `${s.baselineCapped ? '≥ ' : ''}${f1(s.baseline)}/s`, s.baselineRuns.join(', ')],
        ],
      ),
      '',
      `Ratio ours/baseline: ${f2(s.ratio)}.`,
      '',
    );
  }
  if (summary.storm) {
    const s = summary.storm;
    lines.push(
      '## 2. Duplicate storm',
      '',
      `${o.storm.primed} events delivered once first; then ${Math.round(o.storm.repeatShare * 100)} % of deliveries repeat one of them and the rest are new. Closed loop with ${o.storm.concurrency} senders for ${o.storm.seconds} s (throughput), and open loop at ${o.storm.rate}/s (latency).`,
      '',
      table(
        ['run', 'ours', 'baseline', 'speed ratio'],
        [
          [
            '90 % repeats, closed loop: answered/s',
            `${f1(s.mixed.ours.throughput)} (p99 ${msText(s.mixed.ours.p99)})`,
            `${f1(s.mixed.baseline.throughput)} (p99 ${msText(s.mixed.baseline.p99)})`,
            f2(s.mixed.ratio),
          ],
          [
            'repeats only, closed loop: answered/s',
            `${f1(s.duplicatesOnly.ours.throughput)} (p99 ${msText(s.duplicatesOnly.ours.p99)})`,
            `${f1(s.duplicatesOnly.baseline.throughput)} (p99 ${msText(s.duplicatesOnly.baseline.p99)})`,
            `${f2(s.duplicatesOnly.ratio)} (p99: ${f2(s.duplicatesOnly.p99Ratio)})`,
          ],
          [
            `90 % repeats at ${s.fixedRate.rate}/s: p50 / p99 / p99.9`,
            `${msText(s.fixedRate.ours.p50)} / ${msText(s.fixedRate.ours.p99)} / ${msText(s.fixedRate.ours.p999)}`,
            `${msText(s.fixedRate.baseline.p50)} / ${msText(s.fixedRate.baseline.p99)} / ${msText(s.fixedRate.baseline.p999)}`,
            `${f2(s.fixedRate.p50Ratio)} / ${f2(s.fixedRate.p99Ratio)}`,
          ],
          [
            'CPU ms per delivery, repeats only',
            cpuText(s.duplicatesOnly.ours.cpuMs),
            cpuText(s.duplicatesOnly.baseline.cpuMs),
            '',
          ],
        ],
      ),
      '',
      `Per repeat, repeats only (answered/s, and the share of the machine other processes used meanwhile): ${perRepeat(results.ingress?.storm ?? [], (r) => r.duplicatesOnly)}.`,
      '',
    );
  }
  if (summary.endToEnd.length) {
    lines.push(
      '## 3. End to end (offline drafter)',
      '',
      `Messages' first deliveries spread over ${o.e2e.windowSeconds} s; each message delivered ${o.e2e.deliveriesPerMessage} times at random delays up to ${o.e2e.maxDelayMs} ms (twice the same event, once re-emitted under a new event id), all out of order. ` +
        "Latency: first delivery sent → the reply's `sent_at` in the sandbox's outbox. Drain: first delivery → last reply. " +
        `Load average (1 min, the bench's own processes included) during these runs: ${loadRange((results.endToEnd ?? []).map((r) => r.loadAverage[0]))}; ` +
        `other processes on the machine used ${othersText((results.endToEnd ?? []).map((r) => r.othersBusy))} (median).`,
      '',
      table(
        [
          'load',
          'messages',
          'drain',
          'replies/s',
          'webhook→reply p50 / p99',
          'ack p99',
          'replies',
          'duplicate emails',
          'CPU ms per message',
        ],
        summary.endToEnd.map((e) => [
          e.load,
          String(e.messages),
          `${f1(e.drainSeconds)} s`,
          f1(e.throughput),
          `${msText(e.p50)} / ${msText(e.p99)}`,
          msText(e.ackP99),
          `${e.replies}/${e.expectedReplies}`,
          String(e.duplicateEmails),
          cpuText(e.cpuMsPerMessage),
        ]),
      ),
      '',
    );
  }
  if (summary.store.length) {
    lines.push(
      '## 4. Operation store per effect vs a bare insert',
      '',
      `${o.store.operations} operations per run, ${o.store.concurrency} at a time, over a pg pool of 10, same Postgres.`,
      '',
      table(
        ['operation', 'ops/s', 'p50', 'p99'],
        summary.store.map((s) => [s.kind, f1(s.throughput), `${f2(s.p50)} ms`, `${f2(s.p99)} ms`]),
      ),
      '',
      summary.storeOverhead
        ? `Overhead of claim + complete over a bare insert: ${f2(summary.storeOverhead.p50Ratio)}× the p50 latency (+${f2(summary.storeOverhead.extraMsP50)} ms per effect), ${f2(summary.storeOverhead.throughputRatio)}× fewer ops/s — two statements instead of one.`
        : '',
      '',
    );
  }
  if (summary.ingress.length || summary.endToEnd.length) {
    lines.push('## 5. How cost grows (1×, 4×, 16×)', '');
    if (summary.ingress.length) {
      lines.push(
        table(
          [
            'ingress load',
            'ours p99',
            'baseline p99',
            'ours answered/s',
            'baseline answered/s',
            'ours CPU ms/request (api + worker + temporal)',
            'baseline CPU ms/request',
          ],
          summary.ingress.map((r) => [
            `${r.load} (${r.rate}/s)`,
            msText(r.ours.p99),
            msText(r.baseline.p99),
            f1(r.ours.throughput),
            f1(r.baseline.throughput),
            f1((r.ours.cpuMs.api ?? 0) + (r.ours.cpuMs.worker ?? 0) + (r.ours.cpuMs.temporal ?? 0)),
            f1(r.baseline.cpuMs.baseline ?? Number.NaN),
          ]),
        ),
        '',
      );
    }
    if (summary.endToEnd.length) {
      lines.push(
        table(
          ['end-to-end load', 'messages', 'p50', 'p99', 'drain', 'replies/s'],
          summary.endToEnd.map((e) => [
            e.load,
            String(e.messages),
            msText(e.p50),
            msText(e.p99),
            `${f1(e.drainSeconds)} s`,
            f1(e.throughput),
          ]),
        ),
        '',
      );
    }
  }
  lines.push(...intakeSection(results.intake));
  lines.push(...threadsSection(results.threads));
  lines.push(...rehearsalSection(results.rehearsal));
  lines.push(...longEmailSection(summary.longEmail));
  lines.push(...serversSection(summary.servers));
  if (results.profiles?.length) {
    lines.push('## Where the time goes (CPU profiles)', '');
    for (const p of results.profiles) {
      lines.push(
        `**${path.basename(p.file)}** — ${f1(p.totalMs / 1000)} s on CPU (idle excluded): ${p.byPlace
          .slice(0, 8)
          .map((x) => `${x.place} ${(x.share * 100).toFixed(0)} %`)
          .join(', ')}`,
        '',
      );
      lines.push(
        ...p.topFunctions.slice(0, 8).map((fn) => `- ${(fn.share * 100).toFixed(1)} % ${fn.fn} [${fn.place}]`),
        '',
      );
    }
  }
  return lines.join('\n');
}

/** `ours 2605 (others 1 %) / baseline 1603 (2 %); …` for each repeat: a noisy neighbour shows. */
function perRepeat(runs: IngressResults['storm'], pick: (s: IngressResults['storm'][number]) => RunFigures): string {
  const repeats = [...new Set(runs.map((r) => r.repeat))].sort((a, b) => a - b);
  return repeats
    .map((repeat) => {
      const cell = (side: string) => {
        const run = runs.find((r) => r.repeat === repeat && r.side === side);
        if (!run) return `${side} —`;
        const figures = pick(run);
        return `${side} ${f1(figures.throughput)} (others ${Math.round((figures.othersBusy ?? Number.NaN) * 100)} %)`;
      };
      return `#${repeat + 1}: ${cell('ours')}, ${cell('baseline')}`;
    })
    .join('; ');
}

/** Scenario 8 (bench/scenarios/temporal-servers.ts): the rows of the dev server vs Temporal on Postgres. */
function serverRows(servers: Record<ServerKind, ServerSummary>): string[][] {
  const { dev, stack } = servers;
  const rate = (l: ServerSummary['ours']) => `${l.capped ? '≥ ' : ''}${f1(l.median)}/s`;
  const rows = [
    [
      'the Temporal start alone, highest rate with p99 < 100 ms',
      rate(dev.startOnly),
      rate(stack.startOnly),
      f2(ratio(stack.startOnly.median, dev.startOnly.median)),
    ],
    [
      'ours with its worker, highest rate with ack p99 < 100 ms',
      rate(dev.ours),
      rate(stack.ours),
      f2(ratio(stack.ours.median, dev.ours.median)),
    ],
  ];
  for (const d of dev.endToEnd) {
    const s = stack.endToEnd.find((e) => e.load === d.load);
    if (!s) continue;
    rows.push(
      [
        `end to end ${d.load} (${d.messages} messages): webhook → reply p50 / p99`,
        `${msText(d.p50)} / ${msText(d.p99)}`,
        `${msText(s.p50)} / ${msText(s.p99)}`,
        f2(ratio(d.p50, s.p50)),
      ],
      [
        `end to end ${d.load}: drain, replies/s`,
        `${f1(d.drainSeconds)} s, ${f1(d.throughput)}/s`,
        `${f1(s.drainSeconds)} s, ${f1(s.throughput)}/s`,
        f2(ratio(s.throughput, d.throughput)),
      ],
      [
        `end to end ${d.load}: Temporal's CPU ms per message`,
        f1(d.temporalCpuMs),
        f1(s.temporalCpuMs),
        f2(ratio(d.temporalCpuMs, s.temporalCpuMs)),
      ],
      [
        `end to end ${d.load}: replies, duplicate emails`,
        `${d.replies}/${d.expectedReplies}, ${d.duplicateEmails}`,
        `${s.replies}/${s.expectedReplies}, ${s.duplicateEmails}`,
        '',
      ],
    );
  }
  return rows;
}

function serversSection(servers: Record<ServerKind, ServerSummary> | undefined): string[] {
  if (!servers) return [];
  return [
    '## 8. The dev server and Temporal on Postgres, side by side',
    '',
    `The same runs on each server in turn, in this run (order alternating by repeat; ${servers.dev.runs} repeat(s)): the Temporal dev server (in memory) and Temporal's own server on PostgreSQL with SQL visibility and mTLS (\`npm run stack\`'s). ` +
      "Temporal's CPU on the stack includes its Postgres backends. Ratios are stack ÷ dev in speed (≥ 1: the stack at least as fast).",
    '',
    table(['figure (median)', 'dev server', 'Temporal on Postgres', 'ratio'], serverRows(servers)),
    '',
  ];
}

/** Scenarios 6 and 7 (bench/scenarios/intake.ts): one run each, no baseline (it has neither a catch-up nor a Temporal). */
function intakeSection(intake: IntakeFigures | undefined): string[] {
  if (!intake?.catchUp && !intake?.outage) return [];
  const lines = ['## 6–7. Durable intake', ''];
  const c = intake.catchUp;
  if (c)
    lines.push(
      `**Catch-up** of ${c.messages} messages that never reached the webhook, by \`npm run replay\` with the worker running: ` +
        `handed over in **${f1(c.handOverSeconds)} s** (the command, start to exit), all answered ${f1(c.answeredSeconds)} s after it started ` +
        `(${c.replies}/${c.messages} replies); a rerun reported ${c.rerunAlreadyHandedOver} already handed over and ${c.rerunHandedOver} new ` +
        `(exit codes ${c.exitCodes.join(', ')}).`,
      '',
    );
  const o = intake.outage;
  if (o)
    lines.push(
      `**Temporal unreachable** for ${o.outageSeconds} s (a TCP proxy in front of it cut) while ${o.rate} webhooks/s arrive, ${o.messages} messages: ` +
        `non-2xx answers: **${o.non2xx || 'none'}**; ack p50 / p99 ${msText(o.ack.p50)} / ${msText(o.ack.p99)}; intake backlog at the return ${o.backlogAtReturn}; ` +
        `every message answered **${f1(o.drainSeconds)} s** after Temporal's return (${o.replies} replies, ${o.missingReplies} missing, ${o.duplicateEmails} duplicate emails).`,
      '',
    );
  return lines;
}

/** Conversations (bench/scenarios/threads.ts): one run, no baseline. */
function threadsSection(t: ThreadsFigures | undefined): string[] {
  if (!t) return [];
  return [
    '## Conversations',
    '',
    `${t.threads} threads × ${t.messagesPerThread} messages ${t.messages / t.threads > 1 ? '1 s apart' : ''}, each delivered three times out of order ` +
      `(${t.deliveries} deliveries), REPLY_COALESCE_MS=${t.coalesceMs}: **${t.replies} replies**, ${t.answeredTogether} messages answered together, ` +
      `**${t.uncovered} uncovered, ${t.coveredTwice} covered twice**${t.timedOut ? ' (did not drain in time)' : ''}. ` +
      `A thread's last message → its reply p50 / p99 **${msText(t.lastMessageToReply.p50)} / ${msText(t.lastMessageToReply.p99)}** ` +
      `(the burst window included). Temporal history events: ${f1(t.historyEvents.sent)} per message workflow that sent a reply, ` +
      `${f1(t.historyEvents.answeredTogether)} per one answered together.`,
    '',
  ];
}

/** A rehearsal beside the live drain (bench/scenarios/rehearsal.ts): each run, and the medians. */
function rehearsalSection(r: RehearsalFigures | undefined): string[] {
  if (!r) return [];
  const live = r.runs.filter((x) => x.side === 'live');
  const rehearsed = r.runs.filter((x) => x.side === 'rehearsal');
  const cpu = (x: RehearsalRun) =>
    Object.entries(x.cpuMsPerMessage)
      .filter(([, ms]) => Number.isFinite(ms) && ms > 0)
      .map(([name, ms]) => `${name} ${f1(ms)}`)
      .join(', ');
  const cpuRatio = ratio(
    median(live.map((x) => x.totalCpuMsPerMessage)),
    median(rehearsed.map((x) => x.totalCpuMsPerMessage)),
  );
  return [
    '## A rehearsal beside the live drain',
    '',
    `${r.messages} past messages of one inbox, drained live (each delivered three times) and rehearsed with ` +
      `\`npm run rehearse --concurrency ${r.concurrency}\` (its whole process, start-up included), the offline drafter on both sides. ` +
      `Median CPU per message: live **${f1(median(live.map((x) => x.totalCpuMsPerMessage)))} ms**, rehearsal ` +
      `**${f1(median(rehearsed.map((x) => x.totalCpuMsPerMessage)))} ms** (ratio ${f2(cpuRatio)}, ≥ 1: the rehearsal costs no more); ` +
      `messages per second: live ${f1(median(live.map((x) => x.messagesPerSecond)))}, rehearsal ${f1(median(rehearsed.map((x) => x.messagesPerSecond)))}.`,
    '',
    table(
      ['run', 'seconds', 'messages/s', 'CPU ms per message', 'by process'],
      r.runs.map((x) => [
        `${x.side}, repeat ${x.repeat + 1}`,
        f1(x.seconds),
        f1(x.messagesPerSecond),
        f1(x.totalCpuMsPerMessage),
        `${cpu(x)}${
          x.rehearsal
            ? `; start-up ${x.rehearsal.startupCpuMs} ms CPU; outcomes ${Object.entries(x.rehearsal.outcomes)
                .map(([k, n]) => `${k} ${n}`)
                .join(', ')}`
            : ''
        }`,
      ]),
    ),
    '',
  ];
}

/** One long email beside ordinary mail (bench/scenarios/long-email.ts): no baseline, its own reference run. */
function longEmailSection(l: LongEmailSummary | undefined): string[] {
  if (!l) return [];
  return [
    '## One long email beside ordinary mail',
    '',
    `${l.messages} ordinary questions (the bundled help centre answers them; retrieval and drafting run for each) delivered over ${l.windowSeconds} s, ` +
      `alone and with one ${l.lines.toLocaleString('en-GB')}-line email among them (every line a different question; its webhook ${f1(l.longEmail.webhookBytes / 1024)} KiB), ` +
      `in alternating order, ${l.repeats} repeat(s). The ${l.messages} messages' webhook → reply: alone p50 / p99 **${msText(l.alone.p50)} / ${msText(l.alone.p99)}**, ` +
      `with the long email **${msText(l.withLongEmail.p50)} / ${msText(l.withLongEmail.p99)}**: p99 ratio **${f2(l.p99Ratio)}** ` +
      `(by repeat ${l.p99RatiosByRepeat.map(f2).join(', ')}), p50 ratio ${f2(l.p50Ratio)}; the CPU of the bench's processes per run, with ÷ alone, ${f2(l.cpuRatio)}. The long email: ${l.longEmail.statuses.join(', ')} ` +
      `(${l.longEmail.emails.join(', ')} email(s)), ${f1(l.longEmail.seconds)} s from its delivery (median). ` +
      `Missing replies ${l.missingReplies}, duplicate emails ${l.duplicateEmails}.`,
    '',
  ];
}

export function consoleTable(
  summary: Summary,
  intake?: IntakeFigures,
  threads?: ThreadsFigures,
  rehearsal?: RehearsalFigures,
): string {
  const rows: string[][] = [];
  for (const r of summary.ingress)
    rows.push([`ingress ${r.load} ${r.rate}/s p99`, msText(r.ours.p99), msText(r.baseline.p99), f2(r.p99Ratio)]);
  if (summary.sharedCores)
    rows.push([
      `  ${summary.sharedCores.rate}/s, both at once beside our worker`,
      msText(summary.sharedCores.ours.p99),
      msText(summary.sharedCores.baseline.p99),
      f2(ratio(summary.sharedCores.baseline.p99, summary.sharedCores.ours.p99)),
    ]);
  if (summary.equalPriority)
    rows.push([
      `  ${summary.equalPriority.rate}/s, worker at equal priority`,
      msText(summary.equalPriority.ours.p99),
      '',
      '',
    ]);
  if (summary.search) {
    rows.push([
      'max sustained (p99 < 100 ms)',
      `${summary.search.oursCapped ? '≥' : ''}${f1(summary.search.ours)}/s`,
      `${summary.search.baselineCapped ? '≥' : ''}${f1(summary.search.baseline)}/s`,
      f2(summary.search.ratio),
    ]);
    rows.push([
      '  ours without a worker',
      `${f1(summary.search.ingressAlone)}/s`,
      '',
      f2(ratio(summary.search.ingressAlone, summary.search.baseline)),
    ]);
    if (summary.search.startOnlyRuns.length)
      rows.push(['  the Temporal start alone', `${f1(summary.search.startOnly)}/s`, '', '']);
  }
  if (summary.storm) {
    rows.push([
      'storm 90 % repeats (answered/s)',
      f1(summary.storm.mixed.ours.throughput),
      f1(summary.storm.mixed.baseline.throughput),
      f2(summary.storm.mixed.ratio),
    ]);
    rows.push([
      'repeats only (answered/s)',
      f1(summary.storm.duplicatesOnly.ours.throughput),
      f1(summary.storm.duplicatesOnly.baseline.throughput),
      f2(summary.storm.duplicatesOnly.ratio),
    ]);
  }
  for (const e of summary.endToEnd)
    rows.push([
      `e2e ${e.load} ${e.messages} msgs p50 / p99`,
      `${msText(e.p50)} / ${msText(e.p99)}`,
      `drain ${f1(e.drainSeconds)} s`,
      `dups ${e.duplicateEmails}`,
    ]);
  for (const s of summary.store)
    rows.push([`store: ${s.kind} p50`, `${f2(s.p50)} ms`, `${f1(s.throughput)} ops/s`, '']);
  if (intake?.catchUp)
    rows.push([
      `catch-up ${intake.catchUp.messages} msgs: handed over / answered`,
      `${f1(intake.catchUp.handOverSeconds)} s / ${f1(intake.catchUp.answeredSeconds)} s`,
      `rerun: ${intake.catchUp.rerunAlreadyHandedOver} already`,
      '',
    ]);
  if (intake?.outage)
    rows.push([
      `Temporal away ${intake.outage.outageSeconds} s at ${intake.outage.rate}/s: non-2xx, drain`,
      `${intake.outage.non2xx || '0'}, ${f1(intake.outage.drainSeconds)} s`,
      `dups ${intake.outage.duplicateEmails}`,
      `missing ${intake.outage.missingReplies}`,
    ]);
  if (threads)
    rows.push([
      `threads ${threads.threads}×${threads.messagesPerThread}: replies, uncovered/twice, last msg→reply p50/p99`,
      `${threads.replies}, ${threads.uncovered}/${threads.coveredTwice}`,
      `${msText(threads.lastMessageToReply.p50)} / ${msText(threads.lastMessageToReply.p99)}`,
      `events ${f1(threads.historyEvents.sent)} / ${f1(threads.historyEvents.answeredTogether)}`,
    ]);
  if (rehearsal) {
    const of = (side: RehearsalRun['side'], pick: (x: RehearsalRun) => number) =>
      median(rehearsal.runs.filter((x) => x.side === side).map(pick));
    rows.push([
      `rehearsal of ${rehearsal.messages}: CPU ms per message, messages/s (ours: rehearsal, baseline: live)`,
      `${f1(of('rehearsal', (x) => x.totalCpuMsPerMessage))}, ${f1(of('rehearsal', (x) => x.messagesPerSecond))}/s`,
      `${f1(of('live', (x) => x.totalCpuMsPerMessage))}, ${f1(of('live', (x) => x.messagesPerSecond))}/s`,
      f2(
        ratio(
          of('live', (x) => x.totalCpuMsPerMessage),
          of('rehearsal', (x) => x.totalCpuMsPerMessage),
        ),
      ),
    ]);
  }
  const l = summary.longEmail;
  if (l)
    rows.push([
      `long email: the ${l.messages} messages' p99 alone / with it`,
      `${msText(l.alone.p99)} / ${msText(l.withLongEmail.p99)}`,
      `ratio ${f2(l.p99Ratio)}`,
      `long: ${l.longEmail.statuses.join(',')} ${f1(l.longEmail.seconds)} s`,
    ]);
  const tables = [];
  if (rows.length) tables.push(textTable(['figure (median)', 'ours', 'baseline', 'ratio (≥1: ours as fast)'], rows));
  if (summary.servers)
    tables.push(
      textTable(
        ['figure (median)', 'dev server', 'Temporal on Postgres', 'ratio (≥1: Postgres as fast)'],
        serverRows(summary.servers).map((r) => [
          (r[0] ?? '').replace(/, highest rate with (ack )?p99 < 100 ms|webhook → reply /g, ''),
          ...r.slice(1),
        ]),
      ),
    );
  const targets = summary.targets.map(
    (t) => `${t.met === null ? '  -' : t.met ? ' ok' : ' NO'}  ${t.name}: ${t.measured}`,
  );
  return [...tables.flatMap((t) => [t, '']), 'targets:', ...targets].join('\n');
}

/** Columns padded to their widest cell, for the terminal. */
function textTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function writeResults(
  dir: string,
  results: BenchResults,
  summary: Summary,
): { markdownFile: string; jsonFile: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = results.startedAt.replace(/[:.]/g, '-');
  const markdownFile = path.join(dir, `bench-${stamp}.md`);
  const jsonFile = path.join(dir, `bench-${stamp}.json`);
  const text = markdown(results, summary);
  const json = `${JSON.stringify({ ...results, summary }, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`;
  writeFileSync(markdownFile, text);
  writeFileSync(jsonFile, json);
  writeFileSync(path.join(dir, 'latest.md'), text);
  writeFileSync(path.join(dir, 'latest.json'), json);
  return { markdownFile, jsonFile };
}

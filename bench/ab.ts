// `node --import tsx bench/ab.ts <before-dist> <after-dist> [--repeats N]`: the same ingress runs
// against two builds of the app, interleaved (A B B A A B …) in one run, for a hot-path fix's
// before/after figures. Build each side with `npx tsc -p bench/tsconfig.build.json` and copy
// .data/bench/dist away before changing the code.
//
// `node --import tsx bench/ab.ts <dist> --traced [--repeats N]`: one build, "before" with tracing
// off and "after" with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a collector stand-in in this process
// (it answers every export 200 and counts the bytes): what tracing costs the ingress when on.
//
// Per repeat and build: repeats only (closed loop, 32 senders, 4 s: the duplicate path) and new
// messages at 50/s for 4 s with no worker (the API's own cost per start; the worker's CPU would
// only add noise to an API change). Reported: medians, and after/before ratios.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseOptions } from './options';
import { CpuMeter, cpuPer, loadAverage, progress, type BenchContext } from './support/context';
import { seedMessages, Signer } from './support/deliveries';
import {
  bundleWorkflows,
  environmentOn,
  prepareDatabase,
  prepareTemporal,
  type Cleanup,
  type Environment,
} from './support/environment';
import { failures, runClosedLoop, runOpenLoop } from './support/load';
import { resetSandbox, WEBHOOK_PATH } from './support/sides';
import { newSecrets, startOurs, startSandbox } from './support/stack';
import { median, summarize } from './support/stats';

interface Figures {
  build: string;
  dupThroughput: number;
  dupP50: number;
  dupP99: number;
  dupApiCpuMs: number;
  uniqueP50: number;
  uniqueP99: number;
  uniqueApiCpuMs: number;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const traced = args.includes('--traced');
  const dists = args.filter((a) => !a.startsWith('--') && !/^\d+$/.test(a)).map((d) => path.resolve(d));
  const [before, after] = traced ? [dists[0], dists[0]] : dists;
  if (!before || !after)
    throw new Error(
      'usage: node --import tsx bench/ab.ts <before-dist> <after-dist> [--repeats N] | <dist> --traced [--repeats N]',
    );
  const repeatsAt = args.indexOf('--repeats');
  const repeats = repeatsAt >= 0 ? Number(args[repeatsAt + 1]) : 5;
  const cleanups: Cleanup[] = [];
  const runs: Figures[] = [];
  try {
    const [temporal, databaseUrl, workflowBundle] = await Promise.all([
      prepareTemporal(cleanups),
      prepareDatabase(cleanups, progress),
      bundleWorkflows(),
    ]);
    // One server for the whole comparison: both builds meet the same (growing) history.
    const base: Environment = {
      ...environmentOn(temporal, { databaseUrl, workflowBundle, codeRoot: after, tsx: false }),
      freshTemporal: async () => undefined,
    };
    const collector = traced ? await startCollector() : undefined;
    if (collector) cleanups.push(collector.close);
    /** The "after" side's extra environment: tracing on, exporting to the stand-in. */
    const afterEnv: Record<string, string> = collector ? { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } : {};
    const secrets = newSecrets();
    const sandbox = await startSandbox(base, secrets);
    cleanups.push(() => sandbox.process.stop());
    const signer = new Signer(secrets.webhookSecret);
    const context: BenchContext = {
      options: parseOptions([]),
      env: base,
      secrets,
      sandbox,
      signer,
      profileDir: '',
      log: progress,
    };
    progress(`A/B: before ${before}, after ${after}; ${repeats} repeats; load ${loadAverage().join(' / ')}`);
    for (let repeat = 0; repeat < repeats; repeat++) {
      const order =
        repeat % 2 === 0
          ? [
              ['before', before],
              ['after', after],
            ]
          : [
              ['after', after],
              ['before', before],
            ];
      for (const [build, codeRoot] of order as Array<[string, string]>) {
        await resetSandbox(context);
        const env = { ...base, codeRoot };
        const stack = await startOurs(env, sandbox, secrets, {
          worker: false,
          ...(build === 'after' ? { env: afterEnv } : {}),
        });
        try {
          const originals = await seedMessages(sandbox.url, 250);
          // Recorded once (with no worker the workflows wait; the duplicates need only the event rows).
          await runOpenLoop(
            { origin: stack.apiUrl, path: WEBHOOK_PATH },
            originals.slice(0, 50).map((m) => signer.sign(m.body)),
            { rate: 50, connections: 16, maxDurationMs: 20_000 },
          );
          const repeated = Array.from({ length: 20_000 }, (_, i) =>
            signer.sign((originals[i % 50] as { body: string }).body),
          );
          let meter = CpuMeter.forRun(context, { api: stack.api.pid });
          const dups = await runClosedLoop({ origin: stack.apiUrl, path: WEBHOOK_PATH }, repeated, {
            concurrency: 32,
            maxDurationMs: 4_000,
          });
          const dupCpu = cpuPer(meter.read(), dups.sent).api ?? Number.NaN;
          meter = CpuMeter.forRun(context, { api: stack.api.pid });
          const unique = await runOpenLoop(
            { origin: stack.apiUrl, path: WEBHOOK_PATH },
            originals.slice(50).map((m) => signer.sign(m.body)),
            { rate: 50, connections: 64, maxDurationMs: 30_000 },
          );
          const uniqueCpu = cpuPer(meter.read(), unique.sent).api ?? Number.NaN;
          const d = summarize(dups.latencies);
          const u = summarize(unique.latencies);
          const figures = {
            build,
            dupThroughput: dups.throughput,
            dupP50: d.p50,
            dupP99: d.p99,
            dupApiCpuMs: dupCpu,
            uniqueP50: u.p50,
            uniqueP99: u.p99,
            uniqueApiCpuMs: uniqueCpu,
          };
          runs.push(figures);
          const failed = [failures(dups), failures(unique)].filter(Boolean).join(' / ');
          progress(
            `  ${repeat + 1}/${repeats} ${build}: duplicates ${dups.throughput.toFixed(0)}/s p99 ${d.p99.toFixed(1)} ms, API ${dupCpu.toFixed(3)} ms CPU each; new at 50/s p50 ${u.p50.toFixed(1)} ms p99 ${u.p99.toFixed(1)} ms, API ${uniqueCpu.toFixed(2)} ms CPU each${failed ? `; failed ${failed}` : ''}`,
          );
        } finally {
          await stack.stop();
        }
      }
    }
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  }
  const keys: Array<keyof Omit<Figures, 'build'>> = [
    'dupThroughput',
    'dupP50',
    'dupP99',
    'dupApiCpuMs',
    'uniqueP50',
    'uniqueP99',
    'uniqueApiCpuMs',
  ];
  const of = (build: string, key: keyof Omit<Figures, 'build'>) =>
    median(runs.filter((r) => r.build === build).map((r) => r[key]));
  console.log(`\nmedians of ${repeats} repeats (load average now ${loadAverage().join(' / ')})`);
  if (traced) console.log(`before: tracing off; after: tracing on (${collectorBytes} bytes of OTLP exported)`);
  console.log(['figure', 'before', 'after', 'after/before'].join('\t'));
  for (const key of keys)
    console.log(
      [
        key,
        of('before', key).toFixed(3),
        of('after', key).toFixed(3),
        (of('after', key) / of('before', key)).toFixed(3),
      ].join('\t'),
    );
}

let collectorBytes = 0;

/** A collector stand-in for --traced: accepts OTLP/HTTP exports and only counts their bytes. */
async function startCollector(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (collectorBytes += chunk.length));
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

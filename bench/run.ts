// `npm run bench [-- --quick] [--repeats N] [--e2e-repeats N] [--only ingress,storm,e2e,store,intake,threads,rehearsal,long-email] [--profile] [--runtime tsx] [--temporal dev|stack|both]`
//
// Starts its own Temporal dev server and a fresh `replyonce_bench` database (as scripts/test.ts
// does for the suite), compiles the app, runs the sandbox, our API + worker and the Express
// baseline as separate processes on loopback, drives them with pre-signed webhooks, and writes
// bench/results/bench-<time>.{md,json} (and latest.{md,json}). Exits 1 when the end-to-end runs
// lose a reply or send one twice, or a scenario fails.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { withClient } from '../scripts/services/postgres';
import { temporalCliPath } from '../scripts/services/temporal-dev-server';
import { parseOptions, type BenchOptions } from './options';
import { consoleTable, summarizeResults, writeResults, type BenchResults, type MachineInfo } from './report';
import { runEndToEnd } from './scenarios/end-to-end';
import { runIngressScenarios } from './scenarios/ingress';
import { runIntakeScenarios } from './scenarios/intake';
import { runLongEmail } from './scenarios/long-email';
import { runOperationStore } from './scenarios/operation-store';
import { runTemporalServers } from './scenarios/temporal-servers';
import { runRehearsal } from './scenarios/rehearsal';
import { runThreads } from './scenarios/threads';
import { loadAverage, PROFILE_DIR, progress, type BenchContext } from './support/context';
import { Signer } from './support/deliveries';
import {
  bundleWorkflows,
  compileApp,
  environmentOn,
  prepareDatabase,
  prepareTemporal,
  ROOT,
  type Cleanup,
  type Environment,
} from './support/environment';
import { runClosedLoop, runOpenLoop } from './support/load';
import { profilesIn, summarizeProfile } from './support/profile';
import { startBaselineSide, startOurSide, WEBHOOK_PATH, type Side } from './support/sides';
import { newSecrets, startSandbox } from './support/stack';

const RESULTS = path.join(ROOT, 'bench', 'results');

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const cleanups: Cleanup[] = [];
  // Ctrl-C or SIGTERM stops at once: every server process is killed on exit (ServerProcess and the
  // Temporal dev server register for it); an interrupted run writes no report.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping the servers and exiting without a report`);
      process.exit(130);
    });
  }
  if (options.temporal !== 'dev' && process.env.TEMPORAL_ADDRESS)
    throw new Error(
      `--temporal ${options.temporal} starts its own servers; unset TEMPORAL_ADDRESS (${process.env.TEMPORAL_ADDRESS}) or drop the option`,
    );
  const startedAt = new Date().toISOString();
  const loadAtStart = loadAverage();
  progress(
    `${options.quick ? 'quick' : 'full'} run: ${[...options.only].join(', ')}; ${options.repeats} repeats (end to end ${options.e2eRepeats}); load average ${loadAtStart.join(' / ')}`,
  );
  const results: BenchResults = {
    startedAt,
    finishedAt: '',
    options,
    machine: undefined as unknown as MachineInfo,
    failures: [],
  };

  try {
    const setupAt = Date.now();
    // --temporal both: the dev server is the one every other scenario uses; the stack is beside it.
    // Every part settles before a failure is raised, so each one's clean-up is registered and run.
    const [temporal, stackTemporal, databaseUrl, workflowBundle, codeRoot] = await settled([
      prepareTemporal(cleanups, options.temporal === 'both' ? 'dev' : options.temporal),
      options.temporal === 'both' ? prepareTemporal(cleanups, 'stack') : Promise.resolve(undefined),
      prepareDatabase(cleanups, progress),
      bundleWorkflows(),
      options.runtime === 'dist' ? compileApp() : Promise.resolve(ROOT),
    ]);
    const app = { databaseUrl, workflowBundle, codeRoot, tsx: options.runtime === 'tsx' };
    const env = environmentOn(temporal, app);
    const stackEnv = stackTemporal && environmentOn(stackTemporal, app);
    const secrets = newSecrets();
    const sandbox = await startSandbox(env, secrets);
    cleanups.push(() => sandbox.process.stop());
    rmSync(PROFILE_DIR, { recursive: true, force: true });
    const context: BenchContext = {
      options,
      env,
      secrets,
      sandbox,
      signer: new Signer(secrets.webhookSecret),
      profileDir: PROFILE_DIR,
      log: progress,
    };
    results.machine = machineInfo(env, options, loadAtStart, stackEnv);
    results.machine.postgres = await postgresVersion(databaseUrl).catch(() => 'unknown');
    progress(
      `set-up ${((Date.now() - setupAt) / 1000).toFixed(1)} s (Temporal ${temporal.address}${stackEnv ? ` and ${stackEnv.temporalAddress}` : ''}, servers run as ${results.machine.runtime})`,
    );

    const step = async (name: string, run: () => Promise<void>) => {
      try {
        await run();
      } catch (error) {
        const message = `${name} failed: ${error instanceof Error ? error.message : String(error)}`;
        progress(message);
        results.failures.push(message);
      }
    };
    if (options.only.has('store'))
      await step('operation store', async () => void (results.store = await runOperationStore(context)));
    if (options.only.has('ingress') || options.only.has('storm')) {
      await step(
        'ingress',
        async () =>
          void (results.ingress = await runIngressScenarios(context, {
            ingress: options.only.has('ingress'),
            storm: options.only.has('storm'),
          })),
      );
    }
    if (options.only.has('e2e'))
      await step('end to end', async () => void (results.endToEnd = await runEndToEnd(context)));
    if (options.only.has('intake'))
      await step('intake', async () => void (results.intake = await runIntakeScenarios(context)));
    if (options.only.has('threads'))
      await step('threads', async () => void (results.threads = await runThreads(context)));
    if (options.only.has('rehearsal'))
      await step('rehearsal', async () => void (results.rehearsal = await runRehearsal(context)));
    if (options.only.has('long-email'))
      await step('long email', async () => void (results.longEmail = await runLongEmail(context)));
    if (options.only.has('servers') && stackEnv)
      await step(
        'Temporal servers',
        async () => void (results.servers = await runTemporalServers(context, { dev: env, stack: stackEnv })),
      );
    if (options.profile) await step('profiles', async () => void (results.profiles = await profileRuns(context)));

    const endToEndRuns = [
      ...(results.endToEnd ?? []).map((run) => ({ run, where: '' })),
      ...(results.servers ?? []).flatMap((s) =>
        s.endToEnd.map((run) => ({ run, where: ` on the ${s.server} server` })),
      ),
    ];
    for (const { run, where } of endToEndRuns) {
      const what = `end to end ${run.load}${where}, repeat ${run.repeat + 1}`;
      if (run.duplicateEmails > 0) results.failures.push(`${what}: ${run.duplicateEmails} duplicate email(s)`);
      if (run.missingReplies > 0)
        results.failures.push(
          `${what}: ${run.missingReplies} message(s) without a reply${run.timedOut ? ' (did not drain in time)' : ''}`,
        );
    }
    const threads = results.threads;
    if (threads && (threads.uncovered > 0 || threads.coveredTwice > 0 || threads.timedOut))
      results.failures.push(
        `threads: ${threads.uncovered} message(s) uncovered, ${threads.coveredTwice} covered twice${threads.timedOut ? ' (did not drain in time)' : ''}`,
      );
    for (const run of results.rehearsal?.runs ?? [])
      if (run.live && (run.live.missingReplies > 0 || run.live.duplicateEmails > 0))
        results.failures.push(
          `rehearsal's live drain, repeat ${run.repeat + 1}: ${run.live.missingReplies} message(s) without a reply, ${run.live.duplicateEmails} duplicate email(s)`,
        );
    for (const run of results.longEmail?.runs ?? []) {
      const what = `long email repeat ${run.repeat + 1} (${run.withLongEmail ? 'with it' : 'alone'})`;
      if (run.missingReplies > 0 || run.duplicateEmails > 0 || run.timedOut)
        results.failures.push(
          `${what}: ${run.missingReplies} message(s) without a reply, ${run.duplicateEmails} duplicate email(s)${run.timedOut ? ' (did not drain in time)' : ''}`,
        );
    }
    const { catchUp, outage } = results.intake ?? {};
    if (catchUp && catchUp.replies < catchUp.messages)
      results.failures.push(`catch-up: ${catchUp.messages - catchUp.replies} message(s) without a reply`);
    if (catchUp && catchUp.rerunAlreadyHandedOver !== catchUp.messages)
      results.failures.push(
        `catch-up rerun: ${catchUp.rerunAlreadyHandedOver} of ${catchUp.messages} reported already handed over`,
      );
    if (outage && outage.non2xx) results.failures.push(`Temporal outage: non-2xx answers ${outage.non2xx}`);
    if (outage && (outage.missingReplies > 0 || outage.duplicateEmails > 0))
      results.failures.push(
        `Temporal outage: ${outage.missingReplies} message(s) without a reply, ${outage.duplicateEmails} duplicate email(s)`,
      );
  } finally {
    for (const cleanup of cleanups.reverse())
      await cleanup().catch((error: unknown) => progress(`clean-up: ${String(error)}`));
  }

  results.finishedAt = new Date().toISOString();
  if (results.machine) results.machine.loadAtEnd = loadAverage();
  const summary = summarizeResults(results);
  const { markdownFile, jsonFile } = writeResults(RESULTS, results, summary);
  console.log(`\n${consoleTable(summary, results.intake, results.threads, results.rehearsal)}\n`);
  console.log(
    `report: ${path.relative(process.cwd(), markdownFile)}\njson:   ${path.relative(process.cwd(), jsonFile)}`,
  );
  if (results.failures.length) {
    console.error(`\nBENCH FAILED:\n${results.failures.map((f) => `  - ${f}`).join('\n')}`);
    return 1;
  }
  return 0;
}

/**
 * --profile: one more run of each side under node --cpu-prof (the 4× unique rate, then repeats
 * only; for ours also a 4× end-to-end load), then a bottom-up summary of each profile.
 */
async function profileRuns(context: BenchContext): Promise<ReturnType<typeof summarizeProfile>[]> {
  const { options } = context;
  const rate = options.ingress.rates[1];
  const drive = async (side: Side) => {
    const bodies = await side.newEvents(rate * options.ingress.seconds);
    await runOpenLoop(
      { origin: side.url, path: WEBHOOK_PATH },
      bodies.map((b) => context.signer.sign(b)),
      { rate, connections: 256, maxDurationMs: 60_000 },
    );
    const repeated = Array.from({ length: Math.round(options.storm.seconds * 4_000) }, (_, i) =>
      context.signer.sign(bodies[i % bodies.length] as string),
    );
    await runClosedLoop({ origin: side.url, path: WEBHOOK_PATH }, repeated, {
      concurrency: options.storm.concurrency,
      maxDurationMs: options.storm.seconds * 1000,
    });
  };
  context.log('profiling ours (node --cpu-prof)');
  const ours = await startOurSide(context, { cpuProfileDir: context.profileDir });
  try {
    await drive(ours);
  } finally {
    await ours.stop();
  }
  context.log('profiling the baseline (node --cpu-prof)');
  const baseline = await startBaselineSide(context, { cpuProfileDir: context.profileDir });
  try {
    await drive(baseline);
  } finally {
    await baseline.stop();
  }
  const summaries = profilesIn(context.profileDir).map((file) => summarizeProfile(file));
  context.log(
    `profiles in ${path.relative(ROOT, context.profileDir)} (open them in Chrome DevTools → Performance, or speedscope)`,
  );
  return summaries;
}

function machineInfo(
  env: Environment,
  options: BenchOptions,
  loadAtStart: [number, number, number],
  stackEnv?: Environment,
): MachineInfo {
  const run = (file: string, args: string[]) => {
    try {
      return execFileSync(file, args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return 'unknown';
    }
  };
  const dirty = run('git', ['status', '--porcelain']) !== '' ? ' (with uncommitted changes)' : '';
  const devServer = () =>
    `${run(temporalCliPath(), ['--version']).replace(/^temporal version /, '')} (dev server, in memory)`;
  const stack = (address: string) =>
    `Temporal's own server on PostgreSQL with SQL visibility and mTLS (npm run stack's) at ${address}`;
  return {
    cpus: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    temporal: process.env.TEMPORAL_ADDRESS
      ? `at ${env.temporalAddress}`
      : stackEnv
        ? `${devServer()}, and ${stack(stackEnv.temporalAddress)}`
        : options.temporal === 'stack'
          ? stack(env.temporalAddress)
          : devServer(),
    postgres: 'unknown',
    commit: `${run('git', ['rev-parse', '--short', 'HEAD'])}${dirty}`,
    runtime:
      options.runtime === 'dist'
        ? 'compiled JavaScript (tsc → .data/bench/dist, `node <file>.js`)'
        : 'TypeScript via `node --import tsx`',
    loadAtStart,
    loadAtEnd: loadAtStart,
  };
}

async function postgresVersion(databaseUrl: string): Promise<string> {
  return withClient(
    databaseUrl,
    async (client) =>
      (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown',
  );
}

main()
  .then((code) => (process.exitCode = code))
  .catch((error: unknown) => {
    console.error(
      `bench: ${error instanceof Error ? (process.env.DEBUG ? error.stack : error.message) : String(error)}`,
    );
    process.exitCode = 1;
  });

/** Promise.all that waits for every promise to settle before it raises the first failure. */
async function settled<T extends readonly unknown[]>(promises: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import type { Client as PgClient } from 'pg';
import { Client, Connection } from '@temporalio/client';
import { withClient } from '../../scripts/services/postgres';
import type { BenchContext } from '../support/context';
import { CpuMeter, cpuPer, othersBusy, sleep } from '../support/context';
import { seedMessages, type SeededMessage } from '../support/deliveries';
import { DATABASE, NAMESPACE } from '../support/environment';
import { exitedChildrenCpuSeconds, sampleCpuMatching } from '../support/processes';
import { processCpuSeconds } from '../../scripts/services/cpu';
import { LOGS } from '../support/stack';
import { resetSandbox, startOurSide } from '../support/sides';
import { oneLoad, warmUpEndToEnd, type EndToEndFigures } from './end-to-end';

/**
 * A rehearsal beside the live path it imitates (issue 35): N past messages of one inbox in the
 * sandbox, drained live (the end-to-end drain: API and worker, each message delivered three times)
 * and rehearsed (`npm run rehearse`, its own process and worker, every effect diverted), in the
 * same repeat on the same messages, the order alternating (live, rehearsal; rehearsal, live) so a
 * noisy machine hits both alike. Both draft with the worker's default drafter (the offline one,
 * the stand-in every bench drain uses). Measured: messages per second and CPU milliseconds per
 * message of every process taking part (ours, Postgres, Temporal, the sandbox, the load generator).
 * The target: a rehearsal costs no more CPU per message than the live path.
 */

export interface RehearsalRun {
  side: 'live' | 'rehearsal';
  repeat: number;
  messages: number;
  seconds: number;
  messagesPerSecond: number;
  cpuMsPerMessage: Record<string, number>;
  /** Sum over the processes: what one message costs the machine. */
  totalCpuMsPerMessage: number;
  othersBusy: number;
  /** The rehearsal only: its process's CPU before the first result (start-up and the listing), and the outcomes. */
  rehearsal?: {
    startupCpuMs: number;
    firstToLastSeconds: number;
    outcomes: Record<string, number>;
    exitCode: number | null;
  };
  /** The live drain only: replies, duplicates and messages left unanswered (the drain's own checks). */
  live?: Pick<EndToEndFigures, 'replies' | 'duplicateEmails' | 'missingReplies' | 'timedOut'>;
}

export interface RehearsalFigures {
  messages: number;
  concurrency: number;
  runs: RehearsalRun[];
}

/** One inbox: a rehearsal rehearses one, and the live drain of the same messages answers them there. */
const INBOX = 'support-rehearsed@sandbox.agentmail.local';

export async function runRehearsal(context: BenchContext): Promise<RehearsalFigures> {
  const { messages: count, concurrency } = context.options.rehearsal;
  const runs: RehearsalRun[] = [];
  for (let repeat = 0; repeat < context.options.e2eRepeats; repeat++) {
    await context.env.freshTemporal();
    // The live side is started and warmed (JIT, connections, the workflow bundle) on messages of
    // its own before the rehearsed ones are seeded; it idles, uncounted, while the rehearsal runs.
    const live = await startOurSide(context);
    const connection = await Connection.connect({ address: context.env.temporalAddress });
    const client = new Client({ connection, namespace: NAMESPACE });
    try {
      await warmUpEndToEnd(context, live);
      await resetSandbox(context);
      const from = new Date(Date.now() - 60_000);
      const seeded = await seedMessages(
        context.sandbox.url,
        count,
        (done) => context.log(`    seeded ${done}/${count} messages`),
        [INBOX],
      );
      const to = new Date(Date.now() + 60_000);
      const order: Array<RehearsalRun['side']> = repeat % 2 === 0 ? ['live', 'rehearsal'] : ['rehearsal', 'live'];
      for (const side of order) {
        context.log(`rehearsal repeat ${repeat + 1}/${context.options.e2eRepeats}: ${side}, ${count} messages`);
        runs.push(
          side === 'live'
            ? await liveDrain(context, { live, client, repeat, seeded })
            : await rehearse(context, repeat, { from, to, count, concurrency }),
        );
      }
    } finally {
      await connection.close();
      await live.stop();
    }
  }
  return { messages: count, concurrency, runs };
}

/** The end-to-end drain of the seeded messages (bench/scenarios/end-to-end.ts), on the warmed live side. */
async function liveDrain(
  context: BenchContext,
  input: { live: Awaited<ReturnType<typeof startOurSide>>; client: Client; repeat: number; seeded: SeededMessage[] },
): Promise<RehearsalRun> {
  const { repeat, seeded } = input;
  const e2e = { ...context.options.e2e, drainTimeoutMs: context.options.rehearsal.timeoutMs };
  const figures = await oneLoad(
    { ...context, options: { ...context.options, e2e } },
    input.live,
    repeat,
    'live',
    seeded.length,
    input.client,
    seeded,
  );
  return {
    side: 'live',
    repeat,
    messages: seeded.length,
    seconds: figures.drainSeconds,
    messagesPerSecond: figures.throughput,
    cpuMsPerMessage: figures.cpuMsPerMessage,
    totalCpuMsPerMessage: sum(figures.cpuMsPerMessage),
    othersBusy: figures.othersBusy,
    live: {
      replies: figures.replies,
      duplicateEmails: figures.duplicateEmails,
      missingReplies: figures.missingReplies,
      timedOut: figures.timedOut,
    },
  };
}

const sum = (values: Record<string, number>) =>
  Number(
    Object.values(values)
      .filter(Number.isFinite)
      .reduce((a, b) => a + b, 0)
      .toFixed(2),
  );

/**
 * `npm run rehearse` over the inbox's period, as an operator runs it (its own process: the
 * rehearsal's worker is the command). Its CPU is read when it has exited (the bench's exited
 * children), the other processes' between its start and its end.
 */
async function rehearse(
  context: BenchContext,
  repeat: number,
  input: { from: Date; to: Date; count: number; concurrency: number },
): Promise<RehearsalRun> {
  const rehearsalId = `bench-${repeat}-${Date.now().toString(36)}`;
  const entry = context.env.tsx
    ? path.join(context.env.codeRoot, 'scripts', 'rehearse.ts')
    : path.join(context.env.codeRoot, 'scripts', 'rehearse.js');
  const args = [
    ...(context.env.tsx ? ['--import', 'tsx'] : []),
    entry,
    '--inbox',
    INBOX,
    '--from',
    input.from.toISOString(),
    '--to',
    input.to.toISOString(),
    '--limit',
    String(input.count),
    '--concurrency',
    String(input.concurrency),
    '--id',
    rehearsalId,
    '--json',
  ];
  // One connection for the polling below (a connection per poll would fork a backend each time: Postgres CPU counted against the rehearsal).
  return withClient(context.env.databaseUrl, async (db) => {
    const meter = CpuMeter.forRun(context, {});
    const childrenBefore = exitedChildrenCpuSeconds();
    // The rehearsal's own Postgres connections end with its process: sampled while they live.
    const postgres = sampleCpuMatching(` ${DATABASE} `);
    const startedAt = Date.now();
    const log = createWriteStream(path.join(LOGS, 'rehearse.log'), { flags: 'a' });
    const child = spawn(process.execPath, args, {
      env: {
        PATH: process.env.PATH,
        ...context.env.temporalEnv,
        TEMPORAL_NAMESPACE: NAMESPACE,
        DATABASE_URL: context.env.databaseUrl,
        AGENTMAIL_API_KEY: context.secrets.apiKey,
        AGENTMAIL_BASE_URL: context.sandbox.url,
        REPLYONCE_WORKFLOW_BUNDLE: context.env.workflowBundle,
        NODE_ENV: 'production',
        LOG_LEVEL: 'info',
        // As the live drain's worker (bench/support/stack.ts): no burst window, so both do the same work.
        REPLY_COALESCE_MS: '0',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr.pipe(log);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // The start-up's share: the process's CPU when the first message's result is stored.
    let startupCpuMs = Number.NaN;
    let firstAt: number | null = null;
    let done = false;
    void exited.then(() => (done = true));
    let lastReport = 0;
    const timer = setTimeout(() => child.kill('SIGTERM'), context.options.rehearsal.timeoutMs);
    while (!done) {
      await sleep(500);
      const { stored } = await results(db, rehearsalId);
      if (stored > 0 && firstAt === null) {
        firstAt = Date.now();
        startupCpuMs = processCpuSeconds(child.pid ?? -1) * 1000;
      }
      if (Date.now() - lastReport > 3_000) {
        lastReport = Date.now();
        context.log(`    rehearsal: ${stored}/${input.count} after ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
      }
    }
    const exitCode = await exited;
    clearTimeout(timer);
    log.end();
    const seconds = (Date.now() - startedAt) / 1000;
    const usage = meter.read();
    usage.seconds.rehearse = exitedChildrenCpuSeconds() - childrenBefore;
    usage.seconds.postgres = postgres.stop();
    const { stored, outcomes, lastStoredAt, firstStoredAt } = await results(db, rehearsalId);
    if (exitCode !== 0 || stored !== input.count)
      throw new Error(
        `npm run rehearse exited ${exitCode} with ${stored}/${input.count} results (${path.join(LOGS, 'rehearse.log')})`,
      );
    const cpuMsPerMessage = cpuPer(usage, input.count);
    const figures: RehearsalRun = {
      side: 'rehearsal',
      repeat,
      messages: input.count,
      seconds,
      messagesPerSecond: input.count / seconds,
      cpuMsPerMessage,
      totalCpuMsPerMessage: sum(cpuMsPerMessage),
      othersBusy: othersBusy(usage),
      rehearsal: {
        startupCpuMs: Math.round(startupCpuMs),
        firstToLastSeconds: (lastStoredAt - firstStoredAt) / 1000,
        outcomes,
        exitCode,
      },
    };
    context.log(
      `  rehearsal (${input.count} messages, concurrency ${input.concurrency}): ${seconds.toFixed(1)} s, ` +
        `${figures.messagesPerSecond.toFixed(1)} messages/s, ${figures.totalCpuMsPerMessage.toFixed(1)} CPU ms per message ` +
        `(rehearse ${cpuMsPerMessage.rehearse}, start-up ${figures.rehearsal?.startupCpuMs} ms); outcomes ${JSON.stringify(outcomes)}`,
    );
    return figures;
  });
}

/** The rehearsal's stored results so far: how many, by outcome, and when the first and last were stored. */
async function results(
  db: PgClient,
  rehearsalId: string,
): Promise<{ stored: number; outcomes: Record<string, number>; firstStoredAt: number; lastStoredAt: number }> {
  const rows = await db.query<{ outcome: string; n: number; first: Date; last: Date }>(
    `SELECT outcome, count(*)::int AS n, min(updated_at) AS first, max(updated_at) AS last
         FROM rehearsal_results WHERE rehearsal_id = $1 AND status = 'complete' GROUP BY outcome`,
    [rehearsalId],
  );
  const outcomes = Object.fromEntries(rows.rows.map((r) => [r.outcome, r.n]));
  return {
    stored: rows.rows.reduce((n, r) => n + r.n, 0),
    outcomes,
    firstStoredAt: Math.min(...rows.rows.map((r) => r.first.getTime())),
    lastStoredAt: Math.max(...rows.rows.map((r) => r.last.getTime())),
  };
}

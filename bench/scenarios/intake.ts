import { spawn } from 'node:child_process';
import path from 'node:path';
import { TcpProxy } from '../../test/support/tcp-proxy';
import type { BenchContext } from '../support/context';
import { sleep } from '../support/context';
import { INBOXES, seedMessages } from '../support/deliveries';
import { ROOT } from '../support/environment';
import { failures, runOpenLoop } from '../support/load';
import { repliesSent, resetSandbox, startOurSide, WEBHOOK_PATH } from '../support/sides';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * Scenarios 6 and 7, the durable intake (issue 14):
 *
 * 6 catch-up: N messages that never reached the webhook are handed over by `npm run replay`
 *   (the command a person types, run with tsx) while the API and worker run; measured: how long
 *   the command takes to hand them over, how long until every one is answered, and a rerun, which
 *   must report all N as already handed over.
 * 7 Temporal unreachable: a TCP proxy in front of Temporal (the API and the worker connect
 *   through it) is cut for a while as webhooks arrive at a fixed rate; every delivery must get a
 *   2xx, and every message must be answered exactly once after Temporal is back.
 */

export interface CatchUpFigures {
  messages: number;
  /** `npm run replay` wall time, process start to exit (includes tsx start-up, ~1 s). */
  handOverSeconds: number;
  /** From the command's start until the last message's reply. */
  answeredSeconds: number;
  replies: number;
  rerunAlreadyHandedOver: number;
  rerunHandedOver: number;
  exitCodes: [number | null, number | null];
}

export interface OutageFigures {
  rate: number;
  outageSeconds: number;
  messages: number;
  non2xx: string;
  ack: LatencySummary;
  /** The intake backlog on /metrics just before Temporal came back. */
  backlogAtReturn: number;
  /** From Temporal's return until the last reply. */
  drainSeconds: number;
  replies: number;
  duplicateEmails: number;
  missingReplies: number;
}

export interface IntakeFigures {
  catchUp?: CatchUpFigures;
  outage?: OutageFigures;
}

export async function runIntakeScenarios(context: BenchContext): Promise<IntakeFigures> {
  const figures: IntakeFigures = {};
  await context.env.freshTemporal();
  figures.catchUp = await catchUp(context);
  await context.env.freshTemporal();
  figures.outage = await outage(context);
  return figures;
}

function runReplay(
  context: BenchContext,
  taskQueue: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; seconds: number }> {
  const startedAt = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'replay.ts'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: context.env.databaseUrl,
      TEMPORAL_TASK_QUEUE: taskQueue,
      AGENTMAIL_API_KEY: context.secrets.apiKey,
      AGENTMAIL_BASE_URL: context.sandbox.url,
    },
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  return new Promise((resolve) =>
    child.once('exit', (code) => resolve({ code, stdout, seconds: (Date.now() - startedAt) / 1000 })),
  );
}

async function catchUp(context: BenchContext): Promise<CatchUpFigures> {
  const count = context.options.intake.catchUpMessages;
  const side = await startOurSide(context);
  try {
    await resetSandbox(context);
    const since = new Date(Date.now() - 60_000).toISOString();
    await seedMessages(context.sandbox.url, count, (done) => context.log(`    seeded ${done}/${count} messages`));
    const inboxArgs = INBOXES.flatMap((inbox) => ['--inbox', inbox]);
    context.log(`catch-up: npm run replay over ${count} messages in ${INBOXES.length} inboxes, the worker running`);
    const startedAt = Date.now();
    const first = await runReplay(context, side.stack.taskQueue, [...inboxArgs, '--since', since]);
    context.log(`  handed over in ${first.seconds.toFixed(1)} s (exit ${first.code})`);
    let replies = 0;
    const deadline = Date.now() + context.options.e2e.drainTimeoutMs * 2;
    while ((replies = await repliesSent(context)) < count && Date.now() < deadline) await sleep(200);
    const answeredSeconds = (Date.now() - startedAt) / 1000;
    context.log(`  ${replies}/${count} answered ${answeredSeconds.toFixed(1)} s after the command started`);
    const rerun = await runReplay(context, side.stack.taskQueue, [...inboxArgs, '--since', since]);
    const total = /^total: handed over (\d+) \/ already handed over (\d+)/m.exec(rerun.stdout);
    const figures: CatchUpFigures = {
      messages: count,
      handOverSeconds: first.seconds,
      answeredSeconds,
      replies,
      rerunHandedOver: Number(total?.[1] ?? Number.NaN),
      rerunAlreadyHandedOver: Number(total?.[2] ?? Number.NaN),
      exitCodes: [first.code, rerun.code],
    };
    context.log(
      `  rerun: handed over ${figures.rerunHandedOver}, already handed over ${figures.rerunAlreadyHandedOver} (exit ${rerun.code})`,
    );
    return figures;
  } finally {
    await side.stop();
  }
}

async function outage(context: BenchContext): Promise<OutageFigures> {
  const { outageRate: rate, outageSeconds } = context.options.intake;
  // Deliveries start a few seconds before the cut and go on a few seconds after the return.
  const leadSeconds = 3;
  const sendSeconds = outageSeconds + 2 * leadSeconds;
  const count = Math.round(rate * sendSeconds);
  const proxy = await TcpProxy.start(context.env.temporalAddress);
  // The processes connect by Temporal's environment configuration (temporalEnv): point it at the
  // proxy, or the cut would leave them on the server itself and the outage would measure nothing.
  const env = {
    ...context.env,
    temporalAddress: proxy.address,
    temporalEnv: { ...context.env.temporalEnv, TEMPORAL_ADDRESS: proxy.address },
  };
  const side = await startOurSide({ ...context, env });
  try {
    await resetSandbox(context);
    const messages = await seedMessages(context.sandbox.url, count);
    context.log(
      `Temporal unreachable for ${outageSeconds} s while ${rate} webhooks/s arrive (${count} messages over ${sendSeconds} s)`,
    );
    const sending = runOpenLoop(
      { origin: side.url, path: WEBHOOK_PATH },
      messages.map((m) => context.signer.sign(m.body)),
      { rate, connections: 64, maxDurationMs: (sendSeconds + 30) * 1000 },
    );
    await sleep(leadSeconds * 1000);
    proxy.cut();
    context.log('  Temporal cut');
    await sleep(outageSeconds * 1000);
    const backlogAtReturn = await backlog(side.url);
    // Messages arrived all through the cut: none of them can have been started. A backlog of 0
    // means the processes never went through the proxy, and the figures would be meaningless.
    if (!(backlogAtReturn > 0))
      throw new Error(`the Temporal cut did not take: intake backlog ${backlogAtReturn} at the return`);
    proxy.restore();
    const returnedAt = Date.now();
    context.log(`  Temporal back (intake backlog ${backlogAtReturn})`);
    const result = await sending;
    const deadline = Date.now() + 120_000;
    while ((await repliesSent(context)) < count && Date.now() < deadline) await sleep(200);
    await sleep(500);
    const entries = (await (await fetch(`${context.sandbox.url}/_sandbox/outbox`)).json()) as {
      entries: Array<{ message: { inbox_id: string; in_reply_to?: string }; sent_at: string }>;
    };
    const per = new Map<string, number>();
    let lastReply = returnedAt;
    for (const entry of entries.entries) {
      const key = `${entry.message.inbox_id}\n${entry.message.in_reply_to ?? ''}`;
      per.set(key, (per.get(key) ?? 0) + 1);
      lastReply = Math.max(lastReply, Date.parse(entry.sent_at));
    }
    const answered = messages.filter((m) => per.has(`${m.inboxId}\n${m.messageId}`)).length;
    const figures: OutageFigures = {
      rate,
      outageSeconds,
      messages: count,
      non2xx: failures(result),
      ack: summarize(result.latencies),
      backlogAtReturn,
      drainSeconds: (lastReply - returnedAt) / 1000,
      replies: entries.entries.length,
      duplicateEmails: [...per.values()].reduce((n, v) => n + Math.max(0, v - 1), 0),
      missingReplies: count - answered,
    };
    context.log(
      `  acks: ${figures.non2xx || 'all 2xx'}, p99 ${figures.ack.p99.toFixed(1)} ms; answered ${answered}/${count} ` +
        `${figures.drainSeconds.toFixed(1)} s after Temporal's return; duplicates ${figures.duplicateEmails}`,
    );
    return figures;
  } finally {
    await side.stop();
    await proxy.close();
  }
}

async function backlog(apiUrl: string): Promise<number> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  // This deployment's unstarted rows: every state but other_queue (other task queues' rows).
  const lines = text
    .split('\n')
    .filter((l) => /^replyonce_intake_backlog\{state="(waiting|backing_off|dead)"\} /.test(l));
  return lines.length > 0 ? lines.reduce((n, l) => n + Number(l.split(' ')[1]), 0) : Number.NaN;
}

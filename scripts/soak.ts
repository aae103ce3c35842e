// `npm run soak [-- --messages 1000 --rate 20 --minutes 15]`: the production topology (Temporal's own
// server with mTLS on Postgres, two API replicas behind a balancer, two workers) under faults, bounded
// in time. Each message is delivered three times (its event twice, once more under a new event id,
// in a random order); workers are SIGKILLed every few seconds and replaced; one API replica is killed
// for good; the Temporal server is restarted once; Postgres (where threads' turns live) is restarted once (the real cluster, a
// fast shutdown: the app's and the Temporal server's connections all drop; `--postgres proxy`
// instead cuts only the app's connections at a proxy for a few seconds, for a machine where other
// runs share the cluster); 5 % of AgentMail sends are answered by a dropped connection after they were committed.
//
// A share of the messages (--follow-ups, default 0.2) are follow-ups in an earlier message's thread,
// from the same customer, so threads take turns and bursts are answered together (REPLY_COALESCE_MS
// is 2 s here).
//
// It passes when every message is covered by exactly one reply (its own, or a later message's that
// answers it together) or one recorded skip, every thread has one ticket, and every reply one model
// call; it reports the drain time and webhook → reply p50/p99. Exit code 0 on a pass, 1 otherwise.
// The smallest setting: `npm run soak -- --messages 50 --rate 10 --minutes 5`.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { Webhook } from 'svix';
import { Client } from '@temporalio/client';
import { draftKey, type InboundMessageResult } from '../contract';
import { inboundWorkflowId } from '../lib/hashing';
import { workerBuildId } from '../worker/deployment';
import { connectTemporalClient, loadTemporalConnection } from '../lib/temporal-connection';
import { messageReceivedBody, SandboxControl, type InboundResult } from '../sandbox/control-client';
import { migrateDatabase } from './db-migrate';
import { SetupError, messageOf, runMain, sleep } from './services/main';
import { compileApp } from './services/compile';
import { machineCpuSeconds, sampleCpuByCommand } from './services/cpu';
import { freePort, waitForPort } from './services/ports';
import { LOCAL_POSTGRES, restartLocalPostgres, withClient } from './services/postgres';
import { startRoundRobin, type RoundRobin } from './services/round-robin';
import { startTemporalStack, type TemporalStack } from './services/temporal-stack';

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data', 'soak');
const TASK_QUEUE = 'replyonce-soak';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const API_KEY = `am_soak_${randomUUID()}`;
/** A worker is SIGKILLed this often (then replaced at once). */
const KILL_EVERY_MS = 5_000;
/** How long Postgres stays away. */
const POSTGRES_OUTAGE_MS = 5_000;

interface Proc {
  name: string;
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
  exited: Promise<void>;
  spawnedAt: number;
}

/** Where the machine's CPU goes during a soak (by command line; the first pattern that matches). */
const CPU_CATEGORIES = [
  ['Temporal server', /temporal-server/],
  ['Postgres', /^(postgres:|\S*\/postgres )/],
  ['workers', /worker\/main\.[jt]s/],
  ['API replicas', /api\/main\.[jt]s/],
  ['AgentMail sandbox', /sandbox\/main\.[jt]s/],
  ['the soak itself (deliveries, balancer, proxy)', /scripts\/soak\.ts/],
] as const;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      messages: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '20' },
      minutes: { type: 'string', default: '15' },
      postgres: { type: 'string', default: 'restart' },
      'follow-ups': { type: 'string', default: '0.2' },
      runtime: { type: 'string', default: 'dist' },
    },
  });
  if (values.runtime !== 'dist' && values.runtime !== 'tsx')
    throw new SetupError('--runtime must be dist (the compiled JavaScript, as the production image runs it) or tsx');
  const followUps = Number(values['follow-ups']);
  if (!(followUps >= 0 && followUps < 1)) throw new SetupError('--follow-ups must be a share from 0 to below 1');
  if (values.postgres !== 'restart' && values.postgres !== 'proxy')
    throw new SetupError('--postgres must be restart (the real cluster, the default) or proxy');
  const restartPostgres = values.postgres === 'restart';
  const total = Number(values.messages);
  const rate = Number(values.rate);
  const deadline = Date.now() + Number(values.minutes) * 60_000;
  if (!(total > 0 && rate > 0)) throw new SetupError('--messages and --rate must be positive numbers');
  mkdirSync(DATA, { recursive: true });
  const say = (line: string) => console.error(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}`);

  const procs: Proc[] = [];
  let stack: TemporalStack | undefined;
  let balancer: RoundRobin | undefined;
  let postgres: RoundRobin | undefined;
  // Ctrl-C or a SIGTERM stops everything the soak started (a killed soak left its Temporal server,
  // sandbox, API and workers running, still polling), then exits without a report.
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      say(`${signal}: stopping every process the soak started`);
      for (const p of procs) p.child.kill('SIGKILL');
      void Promise.allSettled([stack?.stop(), balancer?.close(), postgres?.close()]).then(() => process.exit(130));
    });
  try {
    stack = await startTemporalStack({ dataDir: DATA, name: 'soak', fresh: true, uiPort: null, log: say });
    await migrateDatabase(stack.appDatabaseUrl, { log: () => undefined });
    // The app reaches Postgres through a proxy that can take it away.
    postgres = await startRoundRobin(0, [LOCAL_POSTGRES.port]);
    const appDb = new URL(stack.appDatabaseUrl);
    appDb.port = String(postgres.port);
    // The processes run the compiled JavaScript, as the production image does (Dockerfile): a worker
    // replaced every few seconds would otherwise spend a second of CPU per start compiling with tsx.
    const [bundle, dist] = await Promise.all([
      bundle_(),
      values.runtime === 'dist'
        ? compileApp({ project: path.join(ROOT, 'tsconfig.build.json'), outDir: path.join(DATA, 'dist'), log: say })
        : Promise.resolve(null),
    ]);
    const spawnApp = (name: string, file: string, env: Record<string, string>) =>
      spawnProcess(
        name,
        dist === null ? ['--import', 'tsx', file] : [path.join(dist, file.replace(/\.ts$/, '.js'))],
        env,
      );

    const sandboxPort = await freePort();
    const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
    procs.push(
      spawnApp('sandbox', 'sandbox/main.ts', {
        SANDBOX_PORT: String(sandboxPort),
        AGENTMAIL_API_KEY: API_KEY,
        AGENTMAIL_WEBHOOK_SECRET: WEBHOOK_SECRET,
        LOG_LEVEL: 'warn',
      }),
    );
    const appEnv = {
      ...stack.clientEnv,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      DATABASE_URL: appDb.toString(),
      AGENTMAIL_API_KEY: API_KEY,
      AGENTMAIL_BASE_URL: sandboxUrl,
      AGENTMAIL_WEBHOOK_SECRET: WEBHOOK_SECRET,
      REPLYONCE_WORKFLOW_BUNDLE: bundle,
      OPERATION_LEASE_MS: '3000',
      METRICS_PORT: '0',
      // Every message has its own sender; the budget is not what this measures.
      REPLY_BUDGET_PER_SENDER: '1000',
      // Conversations: a burst window short enough for the soak's pace, long enough to coalesce follow-ups.
      REPLY_COALESCE_MS: '2000',
      LOG_LEVEL: 'info',
      // One build for the whole soak: a worker started after a commit landed would otherwise be a new
      // build, and the runs pinned to the first would wait for a worker that never comes.
      WORKER_BUILD_ID: workerBuildId(),
    };
    let workerSeq = 0;
    const startWorker = (): Proc => {
      const worker = spawnApp(`worker-${++workerSeq}`, 'worker/main.ts', {
        ...appEnv,
        WORKER_PROMOTE_ON_START: 'true',
      });
      procs.push(worker);
      // As a process supervisor would (systemd, Kubernetes): a worker that exits by itself (it could
      // not reach Postgres or Temporal while they were away) is started again a second later.
      void worker.exited.then(async () => {
        if (worker.child.signalCode !== null) return; // killed by the soak: the killer replaces it
        await sleep(1_000);
        if (workers.includes(worker)) workers = workers.map((w) => (w === worker ? startWorker() : w));
      });
      return worker;
    };
    let workers = [startWorker(), startWorker()];
    const apiPorts = [await freePort(), await freePort()];
    const apis = apiPorts.map((port, i) =>
      spawnApp(`api-${i + 1}`, 'api/main.ts', { ...appEnv, PORT: String(port), HOST: '127.0.0.1' }),
    );
    procs.push(...apis);
    for (const port of [sandboxPort, ...apiPorts]) {
      if (!(await waitForPort(port, 90_000))) throw new SetupError(`nothing listens on :${port} after 90 s`);
    }
    balancer = await startRoundRobin(0, apiPorts);
    const sandbox = new SandboxControl(sandboxUrl);

    // The messages: stored at the sandbox, delivered by this script (three times each).
    const dropEvery = 20; // 5 %
    const messages: Array<{ inbound: InboundResult; firstDeliveryAt?: number }> = [];
    for (let i = 0; i < total; i++) {
      // A follow-up: the same customer again, in the thread of one of the last few messages.
      const earlier =
        i > 0 && Math.random() < followUps ? messages[i - 1 - Math.floor(Math.random() * Math.min(i, 5))] : undefined;
      const inboxId = earlier
        ? earlier.inbound.message.inbox_id
        : i % dropEvery === 0
          ? `drop-${i}@sandbox.agentmail.local`
          : `soak-${i % 10}@sandbox.agentmail.local`;
      const inbound = await sandbox.inbound({
        inbox_id: inboxId,
        from: earlier ? earlier.inbound.message.from : `customer-${i}-${randomUUID().slice(0, 6)}@customer.example`,
        subject: earlier ? `Re: ${earlier.inbound.message.subject ?? ''}` : `Order ${i}`,
        text: earlier ? 'And one more thing about my order.' : 'Where is my order?',
        ...(earlier ? { thread_id: earlier.inbound.message.thread_id } : {}),
        deliver: false,
      });
      messages.push({ inbound });
    }
    const threadSizes = new Map<string, number>();
    for (const { inbound } of messages) {
      const t = `${inbound.message.inbox_id} ${inbound.message.thread_id}`;
      threadSizes.set(t, (threadSizes.get(t) ?? 0) + 1);
    }
    const drops = messages.filter((m) => m.inbound.message.inbox_id.startsWith('drop-')).length;
    await sandbox.setFaults({
      match: { method: 'POST', path: /\/inboxes\/drop-[^/]*\/messages\/.*\/reply$/, count: drops },
      action: 'drop-after-commit',
    });
    say(`${total} messages stored; ${drops} of their sends will be dropped after commit`);

    // Three deliveries per message, out of order: the event, a re-send under a new event id, the event again.
    interface Delivery {
      at: number;
      message: number;
      body: string;
      svixId: string;
      tries: number;
    }
    const started = Date.now();
    const cpu = sampleCpuByCommand(CPU_CATEGORIES);
    const machineBefore = machineCpuSeconds();
    const spreadMs = (total / rate) * 1000;
    const queue: Delivery[] = [];
    messages.forEach(({ inbound }, i) => {
      const base = started + (i / rate) * 1000;
      const original = messageReceivedBody(inbound, inbound.event_id);
      const resent = messageReceivedBody(inbound, `evt_${randomUUID().replaceAll('-', '')}`);
      for (const [body, svixId] of [
        [original, inbound.svix_id],
        [resent, `msg_${randomUUID()}`],
        [original, inbound.svix_id],
      ] as const) {
        queue.push({ at: base + Math.random() * 3_000, message: i, body, svixId, tries: 0 });
      }
    });
    queue.sort((a, b) => a.at - b.at);

    const signer = new Webhook(WEBHOOK_SECRET);
    let inFlight = 0;
    let accepted = 0;
    let retried = 0;
    const failures = new Map<string, number>();
    const post = async (delivery: Delivery) => {
      inFlight++;
      const now = new Date();
      const record = messages[delivery.message]!;
      record.firstDeliveryAt ??= Date.now();
      try {
        const response = await fetch(`http://127.0.0.1:${balancer!.port}/webhooks/agentmail`, {
          method: 'POST',
          body: delivery.body,
          headers: {
            'content-type': 'application/json',
            'svix-id': delivery.svixId,
            'svix-timestamp': String(Math.floor(now.getTime() / 1000)),
            'svix-signature': signer.sign(delivery.svixId, now, delivery.body),
          },
          signal: AbortSignal.timeout(15_000),
        });
        if (response.status >= 200 && response.status < 300) accepted++;
        else throw new Error(`status ${response.status}`);
      } catch (error) {
        // As Svix does: try again later.
        const reason = messageOf(error).startsWith('status') ? messageOf(error) : 'connection failed';
        failures.set(reason, (failures.get(reason) ?? 0) + 1);
        retried++;
        delivery.tries++;
        delivery.at = Date.now() + Math.min(30_000, 1_000 * 2 ** Math.min(delivery.tries, 5));
        queue.push(delivery);
        queue.sort((a, b) => a.at - b.at);
      } finally {
        inFlight--;
      }
    };

    // The faults, on a timeline over the delivery spread.
    const events: string[] = [];
    const note = (line: string) => {
      events.push(`${((Date.now() - started) / 1000).toFixed(1)} s: ${line}`);
      say(line);
    };
    let chaos = true;
    let kills = 0;
    const killedAt = new Map<string, number>();
    let outage: [number, number] | undefined;
    const killer = (async () => {
      while (chaos) {
        await sleep(KILL_EVERY_MS);
        if (!chaos) break;
        const victim = workers[Math.floor(Math.random() * workers.length)]!;
        victim.child.kill('SIGKILL');
        killedAt.set(victim.name, Date.now());
        kills++;
        workers = [...workers.filter((w) => w !== victim), startWorker()];
      }
    })();
    const timeline = (async () => {
      await sleep(spreadMs * 0.15);
      await sleep(spreadMs * 0.15);
      note('restarting the Temporal server');
      await stack.restartServer();
      note('Temporal server back');
      await sleep(spreadMs * 0.1);
      await sleep(spreadMs * 0.1);
      note('SIGKILL api-1 (it stays down; the balancer sends everything to api-2)');
      apis[0]!.child.kill('SIGKILL');
      await sleep(spreadMs * 0.2);
      const cutAt = Date.now();
      if (restartPostgres) {
        note("restarting Postgres (the local cluster; every connection drops, the Temporal server's too)");
        await restartLocalPostgres();
      } else {
        note(`Postgres away for ${POSTGRES_OUTAGE_MS / 1000} s (connections reset and refused)`);
        postgres.cut();
        await sleep(POSTGRES_OUTAGE_MS);
        postgres.restore();
      }
      outage = [cutAt, Date.now()];
      note('Postgres back');
    })();

    // Deliver until every delivery was accepted.
    while ((queue.length > 0 || inFlight > 0) && Date.now() < deadline) {
      const now = Date.now();
      while (queue.length > 0 && queue[0]!.at <= now && inFlight < 64) void post(queue.shift()!);
      await sleep(20);
    }
    await timeline;
    const deliveredAt = Date.now();
    say(
      `all ${accepted} deliveries accepted (${retried} retried) after ${((deliveredAt - started) / 1000).toFixed(1)} s; waiting for the replies`,
    );

    // Drain: every message's run ended (or the time is up). Its result says what covered it.
    const temporalSettings = loadTemporalConnection(stack.clientEnv);
    if (!temporalSettings.ok) throw new SetupError(temporalSettings.problems.join('; '));
    const connection = await connectTemporalClient(temporalSettings.settings);
    const client = new Client({ connection, namespace: temporalSettings.settings.namespace });
    const results = new Map<string, InboundMessageResult>();
    // Runs that closed without a result (failed, terminated, timed out): their status.
    const closedWithout = new Map<string, string>();
    // Where the runs that had not ended by the time limit stood (ReplyStatus → count).
    const stillRunning = new Map<string, number>();
    try {
      // Every few seconds, the message runs that closed since (Temporal's visibility store), and each
      // one's result: no wait is held on one run while another has long ended.
      const byWorkflowId = new Map(
        messages.map(({ inbound }) => {
          const ref = { inboxId: inbound.message.inbox_id, messageId: inbound.message.message_id };
          return [inboundWorkflowId(ref), `${ref.inboxId} ${ref.messageId}`] as const;
        }),
      );
      const closedQuery = `WorkflowType = 'inboundMessageWorkflow' AND ExecutionStatus != 'Running'`;
      // The drain takes minutes: say how far it has come every half minute.
      let progressAt = Date.now() + 30_000;
      while (results.size + closedWithout.size < messages.length && Date.now() < deadline) {
        if (Date.now() >= progressAt) {
          progressAt += 30_000;
          say(`${results.size + closedWithout.size} of ${messages.length} message runs ended`);
        }
        try {
          for await (const run of client.workflow.list({ query: closedQuery })) {
            const k = byWorkflowId.get(run.workflowId);
            if (k === undefined || results.has(k) || closedWithout.has(k)) continue;
            if (run.status.name !== 'COMPLETED') {
              closedWithout.set(k, run.status.name);
              continue;
            }
            results.set(
              k,
              (await client.workflow.getHandle(run.workflowId, run.runId).result()) as InboundMessageResult,
            );
          }
        } catch (error) {
          say(`listing the ended runs failed (${messageOf(error).slice(0, 120)}); trying again`);
        }
        await sleep(3_000);
      }
      for await (const run of client.workflow.list({
        query: `WorkflowType = 'inboundMessageWorkflow' AND ExecutionStatus = 'Running'`,
      })) {
        const status = String(run.searchAttributes?.ReplyStatus?.[0] ?? 'unknown');
        stillRunning.set(status, (stillRunning.get(status) ?? 0) + 1);
      }
    } finally {
      // A call cut short may leave the client's retry timer (grpc-retry) set; when it fires on the
      // closed channel it throws from a timer, which would crash the soak after its verdict and turn
      // a PASS into exit code 1. Only that error, and only from here on, is ignored.
      process.on('uncaughtException', (error) => {
        if (error.message === 'Channel has been shut down') return;
        console.error(error);
        process.exit(1);
      });
      await connection.close();
    }
    let replies: Awaited<ReturnType<SandboxControl['outbox']>> = [];
    const drainedAt = Date.now();
    const cpuSeconds = cpu.stop();
    const machine = machineCpuSeconds();
    const machineBusy = machine.busy - machineBefore.busy;
    const machineShare = machineBusy / (machine.total - machineBefore.total);
    chaos = false;
    await killer;
    await sleep(2_000); // late duplicates, if any, would land now
    replies = await sandbox.outbox();

    // Verify.
    const key = (inboxId: string, messageId: string) => `${inboxId} ${messageId}`;
    const replyCount = new Map<string, number>();
    const repliedAt = new Map<string, number>();
    for (const r of replies) {
      const k = key(r.message.inbox_id, String(r.message.in_reply_to));
      replyCount.set(k, (replyCount.get(k) ?? 0) + 1);
      repliedAt.set(k, Math.min(repliedAt.get(k) ?? Infinity, Date.parse(r.sent_at)));
    }
    // One ticket per thread.
    const tickets = await withClient(stack.appDatabaseUrl, async (db) => {
      const { rows } = await db.query<{ inbox_id: string; thread_id: string; n: string }>(
        'SELECT inbox_id, thread_id, count(*) AS n FROM tickets GROUP BY inbox_id, thread_id',
      );
      return new Map(rows.map((row) => [key(row.inbox_id, row.thread_id), Number(row.n)]));
    });
    // Skipped messages counted on their inbox's open ticket instead of opening one (issue 18 point 4)
    // and intake rows the relay set aside as dead letters (point 8): both 0 in a healthy soak.
    const [foldedTickets, deadLetters] = await withClient(stack.appDatabaseUrl, async (client) => {
      const { rows } = await client.query<{ folded: number; dead: number }>(
        `SELECT (SELECT count(*)::int FROM skipped_ticket_folds WHERE NOT opened) AS folded,
                (SELECT count(*)::int FROM intake WHERE dead_at IS NOT NULL AND started_at IS NULL) AS dead`,
      );
      return [rows[0]?.folded ?? 0, rows[0]?.dead ?? 0];
    });
    // The invariant: every message covered by exactly one reply or one recorded skip.
    const coverings = new Map<string, number>();
    for (const [k, result] of results) {
      const inboxId = k.split(' ')[0]!;
      const covered =
        result.status === 'sent' || result.status === 'rejected' || result.status === 'handed_off'
          ? result.covers
          : result.status === 'skipped'
            ? [k.slice(inboxId.length + 1)]
            : [];
      for (const messageId of covered)
        coverings.set(key(inboxId, messageId), (coverings.get(key(inboxId, messageId)) ?? 0) + 1);
    }
    // A message that asked after its covering reply's turn began is answered by that reply, though
    // not in its `covers` (the messages waiting when the turn was granted): it counts as covered by
    // that reply when the reply was sent and its draft read the message (what the store recorded).
    const answeredLate = [...results].flatMap(([k, result]) =>
      result.status === 'answered-together' && !coverings.has(k)
        ? [{ k, inboxId: k.split(' ')[0]!, by: result.coveredBy }]
        : [],
    );
    const readBy = await withClient(stack.appDatabaseUrl, async (client) => {
      const keys = answeredLate.map((m) => draftKey({ inboxId: m.inboxId, messageId: m.by }));
      const { rows } = await client.query<{ operation_key: string; read: string[] | null }>(
        `SELECT operation_key, result->'read' AS read FROM operations WHERE operation_key = ANY($1) AND status = 'complete'`,
        [keys],
      );
      return new Map(rows.map((row) => [row.operation_key, row.read ?? []]));
    });
    for (const m of answeredLate) {
      const messageId = m.k.slice(m.inboxId.length + 1);
      const sent = results.get(key(m.inboxId, m.by))?.status === 'sent';
      if (sent && readBy.get(draftKey({ inboxId: m.inboxId, messageId: m.by }))?.includes(messageId))
        coverings.set(m.k, 1);
    }
    // Model calls, one log line each ('drafting reply'). A second call for one message is what the
    // design accepts when the first call's draft never reached Postgres: its worker was SIGKILLed
    // between the call and the store, or Postgres was away when the draft was to be stored. Those
    // are counted as explained; any other second call fails the soak.
    const modelCalls = new Map<string, Array<{ at: number; worker: string }>>();
    for (const p of procs) {
      for (const line of p.lines) {
        if (line.msg !== 'drafting reply') continue;
        const calls = modelCalls.get(String(line.operationKey)) ?? [];
        calls.push({ at: Number(line.time), worker: p.name });
        modelCalls.set(String(line.operationKey), calls);
      }
    }
    // The earlier call's worker died before the next call was made: the kill is why the draft was not stored.
    const explained = (call: { at: number; worker: string }, next: { at: number }) => {
      const killed = killedAt.get(call.worker);
      if (killed !== undefined && killed >= call.at && killed <= next.at)
        return 'its worker was SIGKILLed before the draft was stored';
      if (outage && call.at <= outage[1] && next.at >= outage[0])
        return 'Postgres went away before the draft was stored';
      return undefined;
    };
    const problems: string[] = [];
    const explanations = new Map<string, number>();
    const latencies: number[] = [];
    for (const { inbound, firstDeliveryAt } of messages) {
      const ref = { inboxId: inbound.message.inbox_id, messageId: inbound.message.message_id };
      const k = key(ref.inboxId, ref.messageId);
      const calls = (modelCalls.get(draftKey(ref)) ?? []).sort((a, b) => a.at - b.at);
      const result = results.get(k);
      const ownReply = result?.status === 'sent';
      const counts = {
        status: result?.status ?? closedWithout.get(k) ?? 'not ended',
        covered: coverings.get(k) ?? 0,
        replies: replyCount.get(k) ?? 0,
        threadTickets: tickets.get(key(ref.inboxId, inbound.message.thread_id)) ?? 0,
        threadSize: threadSizes.get(key(ref.inboxId, inbound.message.thread_id)) ?? 1,
        modelCalls: calls.length,
      };
      const reasons = calls.slice(0, -1).map((call, i) => explained(call, calls[i + 1]!));
      if (
        counts.covered !== 1 ||
        counts.replies !== (ownReply ? 1 : 0) ||
        counts.threadTickets !== 1 ||
        (ownReply ? counts.modelCalls < 1 : counts.modelCalls > 0) ||
        reasons.some((r) => r === undefined)
      ) {
        const detail = calls.map((c) => `${c.worker}@${((c.at - started) / 1000).toFixed(1)}s`).join(' ');
        problems.push(`${k}: ${JSON.stringify(counts)} calls ${detail}`);
      }
      for (const reason of reasons) if (reason) explanations.set(reason, (explanations.get(reason) ?? 0) + 1);
      const coverer = result?.status === 'answered-together' ? key(ref.inboxId, result.coveredBy) : k;
      const at = repliedAt.get(coverer);
      if (at !== undefined && firstDeliveryAt !== undefined) latencies.push(at - firstDeliveryAt);
    }
    latencies.sort((a, b) => a - b);
    // A worker killed before it polls did nothing but cost its start: how many reached polling, how fast.
    const startDelays = procs
      .filter((p) => p.name.startsWith('worker-'))
      .flatMap((p) => {
        const polling = p.lines.find((line) => line.msg === 'worker polling');
        return polling ? [Number(polling.time) - p.spawnedAt] : [];
      })
      .sort((a, b) => a - b);
    const workerStarts = {
      started: procs.filter((p) => p.name.startsWith('worker-')).length,
      polled: startDelays.length,
      p50: startDelays[Math.floor(startDelays.length / 2)] ?? NaN,
      max: startDelays.at(-1) ?? NaN,
    };
    const pct = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
    const lines = [
      '',
      `soak: ${total} messages (${total - threadSizes.size} follow-ups in ${[...threadSizes.values()].filter((n) => n > 1).length} threads) × 3 deliveries at ${rate}/s over 2 API replicas, Temporal ${stack.binaries.server.split('-').at(-1)} on Postgres with mTLS, the app ${dist === null ? 'from TypeScript (tsx)' : 'compiled'}`,
      `  faults: ${kills} worker SIGKILLs (every ${KILL_EVERY_MS / 1000} s), ${events.length} timeline events:`,
      ...events.map((e) => `    ${e}`),
      `  deliveries: ${accepted} accepted, ${retried} retried after a failure (${[...failures].map(([r, n]) => `${r}: ${n}`).join(', ') || 'none'})`,
      `  drain: ${((drainedAt - started) / 1000).toFixed(1)} s from the first delivery (${((drainedAt - deliveredAt) / 1000).toFixed(1)} s after the last was accepted)`,
      `  webhook → reply: p50 ${(pct(50) / 1000).toFixed(2)} s, p99 ${(pct(99) / 1000).toFixed(2)} s (${latencies.length} replies)`,
      `  CPU: ${[...Object.entries(cpuSeconds)].map(([name, seconds]) => `${name} ${seconds.toFixed(0)} s`).join(', ')}; others ${Math.max(0, machineBusy - Object.values(cpuSeconds).reduce((a, b) => a + b, 0)).toFixed(0)} s; the machine ${(100 * machineShare).toFixed(0)} % busy`,
      `  workers: ${workerStarts.polled} of ${workerStarts.started} started polled before they were killed or the soak ended; from spawn to polling p50 ${(workerStarts.p50 / 1000).toFixed(1)} s, max ${(workerStarts.max / 1000).toFixed(1)} s`,
      `  replies ${replies.length} (${[...results.values()].filter((r) => r.status === 'answered-together').length} messages answered together), tickets ${[...tickets.values()].reduce((a, b) => a + b, 0)} for ${threadSizes.size} threads, model calls ${[...modelCalls.values()].reduce((a, b) => a + b.length, 0)}`,
      `  skipped messages folded into an open ticket: ${foldedTickets}; intake rows in the dead letter: ${deadLetters}`,
      `  runs ended: ${results.size + closedWithout.size} of ${total}${closedWithout.size === 0 ? '' : ` (${closedWithout.size} without a result)`}${stillRunning.size === 0 ? '' : `; still running: ${[...stillRunning].map(([status, n]) => `${n} ${status}`).join(', ')}`}`,
      ...[...explanations].map(
        ([reason, n]) =>
          `  ${n} second model call${n === 1 ? '' : 's'}: ${reason} (the draft is stored after the call; see DESIGN.md)`,
      ),
      problems.length === 0
        ? `  PASS: every message is covered by exactly one reply or skip, every thread has one ticket, every reply one model call unless a fault struck between the call and its store`
        : `  FAIL: ${problems.length} messages off:\n${problems
            .slice(0, 20)
            .map((p) => `    ${p}`)
            .join('\n')}`,
      '',
    ];
    console.log(lines.join('\n'));
    writeFileSync(path.join(DATA, 'last-report.txt'), lines.join('\n'));
    return problems.length === 0 ? 0 : 1;
  } finally {
    for (const p of [...procs].reverse()) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    // Each process's JSON log, to look at what happened (the app's logs carry ids, never bodies or addresses).
    mkdirSync(path.join(DATA, 'logs'), { recursive: true });
    for (const p of procs) {
      writeFileSync(path.join(DATA, 'logs', `${p.name}.log`), p.lines.map((line) => JSON.stringify(line)).join('\n'));
    }
    await balancer?.close();
    await postgres?.close();
    await stack?.stop();
  }
}

function spawnProcess(name: string, args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let pending = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    for (const part of parts) {
      try {
        lines.push(JSON.parse(part) as Record<string, unknown>);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    if (process.env.SOAK_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
  });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code) => {
      // A process that ends by itself with an error (not one the soak killed) says why at once.
      if (code !== null && code !== 0) {
        const why = lines
          .filter((line) => typeof line.level === 'number' && line.level >= 50)
          .slice(-3)
          .map((line) => `${String(line.msg)}${line.err ? `: ${JSON.stringify(line.err).slice(0, 600)}` : ''}`);
        console.error(
          `[soak ${new Date().toISOString().slice(11, 19)}] ${name} exited with code ${code}${why.length > 0 ? `: ${why.join(' | ')}` : ''}`,
        );
      }
      resolve();
    }),
  );
  return { name, child, lines, exited, spawnedAt: Date.now() };
}

/** The workflow code, bundled once: a replaced worker then starts polling in seconds, not after a rebuild. */
async function bundle_(): Promise<string> {
  const file = path.join(DATA, 'workflow-bundle.js');
  try {
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../workflows'),
      logger: new DefaultLogger('WARN'),
    });
    writeFileSync(`${file}.tmp`, code);
    renameSync(`${file}.tmp`, file);
    return file;
  } catch (error) {
    throw new SetupError(`bundling workflows/ failed: ${messageOf(error)}`);
  }
}

if (require.main === module) {
  runMain(main);
}

import { compileApp, prepareDatabase, prepareTemporal, bundleWorkflows, type Cleanup, type Environment } from './support/environment';
import { newSecrets, startSandbox, startOurs } from './support/stack';
import { seedMessages, Signer } from './support/deliveries';
import { runOpenLoop, failures } from './support/load';
import { summarize } from './support/stats';
import { cpuSnapshot, cpuBetween } from './support/processes';

async function main() {
  const cleanups: Cleanup[] = [];
  try {
    const [temporal, databaseUrl, workflowBundle, codeRoot] = await Promise.all([prepareTemporal(cleanups), prepareDatabase(cleanups), bundleWorkflows(), process.env.NOBUILD ? Promise.resolve('/work/main/.data/bench/dist') : compileApp()]);
    const env: Environment = { temporalAddress: temporal.address, databaseUrl, workflowBundle, codeRoot, tsx: false, temporalPid: temporal.pid };
    const secrets = newSecrets();
    const sandbox = await startSandbox(env, secrets);
    cleanups.push(() => sandbox.process.stop());
    const signer = new Signer(secrets.webhookSecret);
    const ours = await startOurs(env, sandbox, secrets, { cpuProfileDir: process.env.PROF });
    for (const [n, rate] of (process.env.PLAN ?? '20:2,200:20').split(',').map((x) => x.split(':').map(Number))) {
      await fetch(`${sandbox.url}/_sandbox/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      const msgs = await seedMessages(sandbox.url, n!);
      const deliveries = msgs.map((m) => signer.sign(m.body));
      const before = cpuSnapshot({ api: ours.api.pid, worker: ours.worker.pid, temporal: temporal.pid!, sandbox: sandbox.process.pid, postgres: 'postgres: 15/replyonce', me: process.pid });
      const t0 = Date.now();
      const r = await runOpenLoop({ origin: ours.apiUrl, path: '/webhooks/agentmail' }, deliveries, { rate: rate!, connections: 64, maxDurationMs: 60_000 });
      const s1 = summarize(r.latencies);
      let entries: Array<{ message: { in_reply_to: string }; sent_at: string }> = [];
      for (;;) {
        const o = await (await fetch(`${sandbox.url}/_sandbox/outbox`)).json() as { count: number; entries: typeof entries };
        if (o.count >= n! || Date.now() - t0 > 180_000) { entries = o.entries; break; }
        await new Promise((r) => setTimeout(r, 250));
      }
      const cpu = cpuBetween(before, cpuSnapshot({ api: ours.api.pid, worker: ours.worker.pid, temporal: temporal.pid!, sandbox: sandbox.process.pid, postgres: 'postgres: 15/replyonce', me: process.pid }));
      const sentAt = new Map(msgs.map((m, i) => [m.messageId, r.epochMs + r.sentAt[i]!]));
      const e2e = entries.map((e) => Date.parse(e.sent_at) - sentAt.get(e.message.in_reply_to)!);
      const s2 = summarize(e2e);
      console.log(`n=${n} rate=${rate}: ack p50 ${s1.p50.toFixed(1)} p99 ${s1.p99.toFixed(1)} ${failures(r)} | replies ${entries.length} drain ${((Date.now() - t0) / 1000).toFixed(1)} s e2e p50 ${s2.p50.toFixed(0)} p99 ${s2.p99.toFixed(0)} | cpu/msg ms`, Object.fromEntries(Object.entries(cpu.seconds).map(([k, v]) => [k, (v / n! * 1000).toFixed(2)])), 'busy', cpu.machineBusy.toFixed(2));
    }
    {
      const { Connection, Client } = await import('@temporalio/client');
      const { inboundWorkflowId } = await import('../lib/hashing');
      const proto = (require('@temporalio/proto') as typeof import('@temporalio/proto')).temporal;
      const connection = await Connection.connect({ address: temporal.address });
      const client = new Client({ connection, namespace: 'replyonce-bench' });
      const rows = await (await fetch(`${sandbox.url}/_sandbox/outbox`)).json() as { entries: Array<{ message: { inbox_id: string; in_reply_to: string } }> };
      const e = rows.entries[0]!;
      const h = await client.workflow.getHandle(inboundWorkflowId({ inboxId: e.message.inbox_id, messageId: e.message.in_reply_to })).fetchHistory();
      const counts: Record<string, number> = {};
      let first = 0;
      for (const ev of h.events ?? []) {
        const t = proto.api.enums.v1.EventType[ev.eventType!]!;
        const ms = Number(ev.eventTime!.seconds) * 1000 + Math.round((ev.eventTime!.nanos ?? 0) / 1e6);
        if (!first) first = ms;
        console.log(String(ms - first).padStart(5), t);
        counts[t] = (counts[t] ?? 0) + 1;
      }
      console.log(h.events?.length, counts);
      await connection.close();
    }
    await ours.stop();
  } finally {
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(e));
  }
}
main().catch((e) => { console.error(e); process.exit(1); });

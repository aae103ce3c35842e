import { compileApp, prepareDatabase, prepareTemporal, bundleWorkflows, type Cleanup, type Environment } from './support/environment';
import { newSecrets, startSandbox, startOurs, startBaseline } from './support/stack';
import { seedMessages, Signer } from './support/deliveries';
import { runOpenLoop, runClosedLoop, failures } from './support/load';
import { summarize } from './support/stats';

async function main() {
  const cleanups: Cleanup[] = [];
  try {
    let t = Date.now();
    const [temporal, databaseUrl, workflowBundle, codeRoot] = await Promise.all([prepareTemporal(cleanups), prepareDatabase(cleanups), bundleWorkflows(), compileApp()]);
    console.log('setup', Date.now() - t);
    const env: Environment = { temporalAddress: temporal.address, databaseUrl, workflowBundle, codeRoot, tsx: false, temporalPid: temporal.pid };
    const secrets = newSecrets();
    const sandbox = await startSandbox(env, secrets);
    cleanups.push(() => sandbox.process.stop());
    t = Date.now();
    const msgs = await seedMessages(sandbox.url, Number(process.env.N ?? 2000));
    console.log('seed', msgs.length, Date.now() - t, 'ms');
    const signer = new Signer(secrets.webhookSecret);
    t = Date.now();
    const deliveries = msgs.map((m) => signer.sign(m.body));
    console.log('sign', Date.now() - t, 'ms');
    t = Date.now();
    const ours = await startOurs(env, sandbox, secrets, { worker: process.env.WORKER !== "0" });
    console.log('start ours', Date.now() - t);
    const rate = Number(process.env.RATE ?? 100);
    const r = await runOpenLoop({ origin: ours.apiUrl, path: '/webhooks/agentmail' }, deliveries, { rate, connections: 64, maxDurationMs: 60_000 });
    console.log('ours', r.sent, r.ok, r.throughput.toFixed(1), failures(r), summarize(r.latencies));
    t = Date.now();
    for (;process.env.WORKER !== "0";) {
      const s = await (await fetch(`${sandbox.url}/_sandbox/state`)).json() as { sent: number };
      if (s.sent >= msgs.length || Date.now() - t > 120_000) { console.log('drained', s.sent, Date.now() - t); break; }
      await new Promise((r) => setTimeout(r, 500));
    }
    await ours.stop();
    const base = await startBaseline(env, secrets);
    const deliveries2 = msgs.map((m) => signer.sign(m.body));
    const b = await runOpenLoop({ origin: base.url, path: '/webhooks/agentmail' }, deliveries2, { rate, connections: 64, maxDurationMs: 60_000 });
    console.log('baseline', b.sent, b.ok, b.throughput.toFixed(1), failures(b), summarize(b.latencies));
    const c = await runClosedLoop({ origin: base.url, path: '/webhooks/agentmail' }, msgs.map((m) => signer.sign(m.body.replace(m.eventId, m.eventId + 'x'))), { concurrency: 32, maxDurationMs: 20_000 });
    console.log('baseline closed', c.sent, c.ok, c.throughput.toFixed(1), failures(c), summarize(c.latencies));
    await base.stop();
  } finally {
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(e));
  }
}
main().catch((e) => { console.error(e); process.exit(1); });

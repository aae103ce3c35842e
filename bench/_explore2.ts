import { Client, Connection } from '@temporalio/client';
import { prepareTemporal, type Cleanup, NAMESPACE } from './support/environment';
import { startInboundWorkflow } from '../api/start-inbound-workflow';
import { summarize } from './support/stats';
import { cpuSnapshot, cpuBetween } from './support/processes';

async function main() {
  const cleanups: Cleanup[] = [];
  try {
    const temporal = await prepareTemporal(cleanups);
    const connection = await Connection.connect({ address: temporal.address });
    const client = new Client({ connection, namespace: NAMESPACE });
    for (const [conc, sa] of [[1, true], [1, false], [8, true], [8, false], [8, true], [8, false]] as const) {
      const n = conc === 1 ? 100 : 400;
      const lat: number[] = [];
      let i = 0;
      const before = cpuSnapshot({ temporal: temporal.pid!, me: process.pid });
      const t0 = performance.now();
      await Promise.all(Array.from({ length: conc }, async () => {
        while (i < n) {
          const k = i++;
          const s = performance.now();
          if (sa) await startInboundWorkflow(client, { taskQueue: 'nobody', deadline: new Date(Date.now() + 10000) }, { inboxId: 'a@b', messageId: `m-${conc}-${k}-${Math.random()}`, threadId: 't' });
          else await client.workflow.start('inboundMessageWorkflow', { taskQueue: 'nobody', workflowId: `w-${Math.random()}`, args: [{}] });
          lat.push(performance.now() - s);
        }
      }));
      const el = performance.now() - t0;
      const cpu = cpuBetween(before, cpuSnapshot({ temporal: temporal.pid!, me: process.pid }));
      const s = summarize(lat);
      console.log(`conc ${conc} sa ${sa}: ${(n / el * 1000).toFixed(0)}/s p50 ${s.p50.toFixed(1)} p99 ${s.p99.toFixed(1)} cpu`, cpu.seconds, 'machine', cpu.machineBusy.toFixed(2));
    }
    await connection.close();
  } finally {
    for (const c of cleanups.reverse()) await c();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });

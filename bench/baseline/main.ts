import pg from 'pg';
import { baselineSchemaSql, createBaselineApp } from './app';
import { closeOnSignal } from './close-on-signal';

/**
 * The baseline as a process (the bench runs it beside our ingress, on the same Postgres):
 * PORT, DATABASE_URL, AGENTMAIL_WEBHOOK_SECRET. A plain pg Pool, as its authors would use.
 */
async function main(): Promise<void> {
  const { PORT = '3100', HOST = '127.0.0.1', DATABASE_URL, AGENTMAIL_WEBHOOK_SECRET } = process.env;
  if (!DATABASE_URL || !AGENTMAIL_WEBHOOK_SECRET)
    throw new Error('DATABASE_URL and AGENTMAIL_WEBHOOK_SECRET are required');
  const pool = new pg.Pool({ connectionString: DATABASE_URL });
  await pool.query(baselineSchemaSql);
  const app = createBaselineApp({ pool, webhookSecret: AGENTMAIL_WEBHOOK_SECRET });
  const server = app.listen(Number(PORT), HOST, () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : PORT;
    console.log(JSON.stringify({ msg: 'baseline listening', address: `http://${HOST}:${port}` }));
  });
  closeOnSignal(server, () => pool.end());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

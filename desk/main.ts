import { Client } from '@temporalio/client';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadDeskConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { createLogger } from '../lib/logger';
import { connectTemporalClient, describeTemporal } from '../lib/temporal-connection';
import { buildDesk } from './app';

/**
 * `npm run start:desk`: the review desk on DESK_HOST:DESK_PORT (127.0.0.1:3300 by default), a
 * listener of its own, never the webhook's. Temporal is connected lazily: the desk comes up
 * while Temporal is down and says so on the page until it answers.
 */
async function main(): Promise<void> {
  const config = loadDeskConfig();
  const logger = createLogger('desk', config.LOG_LEVEL);
  const db = createDb(config.DATABASE_URL, { max: 5 });
  const connection = await connectTemporalClient(config.temporal, { lazy: true });
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const app = buildDesk({
    db,
    temporal,
    agentmail: createAgentMailClient({
      apiKey: config.AGENTMAIL_API_KEY,
      baseUrl: config.AGENTMAIL_BASE_URL,
      timeoutSeconds: 10,
    }),
    logger,
    sessionTtlMs: config.DESK_SESSION_TTL,
    publicUrl: config.DESK_PUBLIC_URL,
    trustProxy: config.DESK_TRUST_PROXY,
    signInAttemptsPerMinute: config.DESK_SIGNIN_ATTEMPTS_PER_MINUTE,
  });
  app.addHook('onClose', async () => {
    await connection.close();
    await db.end();
  });
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'desk shutting down');
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));

  const address = await app.listen({ port: config.DESK_PORT, host: config.DESK_HOST });
  logger.info(
    {
      address,
      publicUrl: config.DESK_PUBLIC_URL,
      temporal: describeTemporal(config.temporal),
      namespace: config.TEMPORAL_NAMESPACE,
    },
    'desk listening',
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? `desk: ${error.message}` : error);
  process.exit(1);
});

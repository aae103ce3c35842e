import './instrumentation'; // first: tracing patches http, fastify and pg as they load
import { Client } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadApiConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { createLogger } from '../lib/logger';
import { connectTemporalClient, describeTemporal } from '../lib/temporal-connection';
import { activeTracing } from '../lib/tracing';
import { buildApp } from './app';

/**
 * The ingress process. Temporal is connected lazily so the API comes up while Temporal is down:
 * webhooks are still accepted (one Postgres commit each) and the intake relay starts their
 * workflows once Temporal answers again.
 */
async function main(): Promise<void> {
  const config = loadApiConfig();
  const logger = createLogger('api', config.LOG_LEVEL);
  const db = createDb(config.DATABASE_URL, {
    queryTimeoutMs: config.INGRESS_DEADLINE_MS,
    connectTimeoutMs: config.INGRESS_DEADLINE_MS,
  });
  const connection = await connectTemporalClient(config.temporal, {
    lazy: true,
    connectTimeoutMs: config.INGRESS_DEADLINE_MS,
  });
  const temporal = new Client({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    // Traced client calls (signals, queries); the ingress's raw start injects its own trace header.
    ...(activeTracing() ? { interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } } : {}),
  });
  const app = buildApp({
    db,
    temporal,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    webhookSecret: config.AGENTMAIL_WEBHOOK_SECRET,
    deadlineMs: config.INGRESS_DEADLINE_MS,
    bodyLimitBytes: config.WEBHOOK_BODY_LIMIT_BYTES,
    requestTimeoutMs: config.INGRESS_REQUEST_TIMEOUT_MS,
    connectionTimeoutMs: config.INGRESS_CONNECTION_TIMEOUT_MS,
    maxConcurrentRequests: config.INGRESS_MAX_CONCURRENT_REQUESTS,
    logger,
    intake: {
      deadLetter: {
        afterRefusals: config.INTAKE_DEAD_LETTER_AFTER_ATTEMPTS,
        afterMs: config.INTAKE_DEAD_LETTER_AFTER_MS,
      },
    },
    admin:
      config.ADMIN_TOKEN && config.AGENTMAIL_API_KEY
        ? {
            token: config.ADMIN_TOKEN,
            agentmail: createAgentMailClient({ apiKey: config.AGENTMAIL_API_KEY, baseUrl: config.AGENTMAIL_BASE_URL }),
            operationRetentionDays: config.OPERATION_RETENTION_DAYS,
          }
        : undefined,
  });
  app.addHook('onClose', async () => {
    await connection.close();
    await db.end();
    await activeTracing()?.shutdown(); // flushes the last spans
  });

  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down: finishing in-flight requests, the relay pass and the starts in flight');
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));

  const address = await app.listen({ port: config.PORT, host: config.HOST });
  logger.info(
    {
      address,
      temporal: describeTemporal(config.temporal),
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
    },
    'api listening',
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});

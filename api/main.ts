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
import { MetricsPortInUseError, startMetricsServer } from '../worker/metrics-server';

/** Where Prometheus finds an API replica's /metrics unless API_METRICS_PORT says otherwise (the worker's is 9464). */
export const DEFAULT_API_METRICS_PORT = 9465;

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

  // The metrics on a listener of their own, off the public port (issue 18 point 10).
  const metricsServer = await startMetricsServer({
    port: config.API_METRICS_PORT ?? DEFAULT_API_METRICS_PORT,
    host: config.API_METRICS_HOST,
    fallbackToFreePort: config.API_METRICS_PORT === undefined,
  }).catch(async (error: unknown) => {
    await app.close();
    throw error instanceof MetricsPortInUseError
      ? new Error(
          `API_METRICS_PORT=${config.API_METRICS_PORT} on ${config.API_METRICS_HOST} is already in use: set API_METRICS_PORT to a free port, or to 0 for any free one`,
        )
      : error;
  });
  app.addHook('onClose', () => metricsServer.close());
  if (metricsServer.movedFrom !== undefined)
    logger.warn(
      { metrics: metricsServer.url, taken: metricsServer.movedFrom },
      `API metrics port ${metricsServer.movedFrom} is taken (another replica on this host?): serving /metrics on a free port; set API_METRICS_PORT to choose one`,
    );
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
      metrics: metricsServer.url,
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

import './instrumentation'; // first: tracing patches http, fastify and pg as they load
import { Client, isGrpcServiceError } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadApiConfig } from '../lib/config';
import { createDb, describeDatabaseUrl } from '../lib/db';
import { createLogger } from '../lib/logger';
import { connectTemporalClient, describeTemporal, plainReason } from '../lib/temporal-connection';
import { activeTracing } from '../lib/tracing';
import { buildApp } from './app';
import { StartupChecks } from './startup-checks';
import { MetricsPortInUseError, startMetricsServer } from '../lib/metrics-server';

/** A start-up failure with a cause the operator can act on, said in one line. */
class StartupError extends Error {
  override name = 'StartupError';
}

/** gRPC status codes the server answers with. */
const NOT_FOUND = 5;
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;
/** How long one start-up check of Temporal waits for an answer. */
const TEMPORAL_PROBE_TIMEOUT_MS = 5_000;

/** Why the start-up check of Temporal failed, in words an operator acts on. */
function temporalProblem(error: unknown, namespace: string, security: string, timeoutMs: number): string {
  const code = isGrpcServiceError(error) ? (error.code as number) : undefined;
  if (code === NOT_FOUND) {
    return `it has no namespace ${namespace} (TEMPORAL_NAMESPACE): create it with npm run temporal:setup`;
  }
  const hint =
    security === 'plaintext'
      ? 'is the server running there? If it requires TLS, set TEMPORAL_TLS=true'
      : 'is the server running there, and do the TEMPORAL_TLS_* settings match its certificate?';
  if (code === DEADLINE_EXCEEDED || code === UNAVAILABLE) return `no answer within ${timeoutMs / 1000} s (${hint})`;
  return `${plainReason(error instanceof Error ? error.message : String(error))} (${hint})`;
}

/** Where Prometheus finds an API replica's /metrics unless API_METRICS_PORT says otherwise (the worker's is 9464). */
export const DEFAULT_API_METRICS_PORT = 9465;

/**
 * The ingress process. Temporal is connected lazily so the API comes up while Temporal is down:
 * webhooks are still accepted (one Postgres commit each) and the intake relay starts their
 * workflows once Temporal answers again.
 */
async function main(): Promise<void> {
  const config = loadApiConfig();
  const logger = createLogger('api', config.LOG_LEVEL, config.LOG_FORMAT);
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
  // Neither is needed to start: said, per attempt, until each answers (and in /readyz).
  const startup = new StartupChecks(logger, [
    {
      name: 'postgres',
      label: 'Postgres',
      variable: 'DATABASE_URL',
      target: describeDatabaseUrl(config.DATABASE_URL),
      probe: async () => {
        await db.query('SELECT 1');
      },
    },
    {
      name: 'temporal',
      label: 'Temporal',
      variable: 'TEMPORAL_ADDRESS',
      target: describeTemporal(config.temporal),
      probe: async () => {
        const timeoutMs = Math.max(config.INGRESS_DEADLINE_MS, TEMPORAL_PROBE_TIMEOUT_MS);
        try {
          await connection.withDeadline(Date.now() + timeoutMs, () =>
            connection.workflowService.describeNamespace({ namespace: config.TEMPORAL_NAMESPACE }),
          );
        } catch (error) {
          throw new Error(temporalProblem(error, config.TEMPORAL_NAMESPACE, config.temporal.security, timeoutMs), {
            cause: error,
          });
        }
      },
    },
  ]);
  const app = buildApp({
    startup,
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
    reviewProxyUserHeader: config.REVIEW_PROXY_USER_HEADER,
    reviewProxySecret: config.REVIEW_PROXY_SECRET,
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
            ticketProvider: config.TICKET_PROVIDER,
          }
        : undefined,
  });
  app.addHook('onClose', async () => {
    startup.stop();
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
      ? new StartupError(
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

  startup.start();
  const address = await app.listen({ port: config.PORT, host: config.HOST }).catch(async (error: unknown) => {
    const code = (error as { code?: unknown }).code;
    await app.close().catch(() => undefined);
    if (code === 'EADDRINUSE') {
      throw new StartupError(
        `PORT=${config.PORT} on ${config.HOST} is already in use (another API, or \`npm run dev\`?): stop it or set PORT to a free port`,
      );
    }
    if (code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new StartupError(
        `cannot listen on HOST=${config.HOST} PORT=${config.PORT} (${String(code)}): choose a port above 1023, or a HOST address of this machine`,
      );
    }
    throw error;
  });
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
  // A problem the operator fixes (configuration, a port): its message, no stack.
  if (error instanceof ConfigError) console.error(error.message);
  else if (error instanceof StartupError) console.error(`The API cannot start: ${error.message}`);
  else console.error(error);
  process.exit(1);
});

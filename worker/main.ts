import './instrumentation'; // first: tracing patches http and pg as they load
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type LogLevel } from '@temporalio/worker';
import { createDrafter } from '../activities/drafting/create-drafter';
import { createTicketProvider } from '../activities/tickets/create-ticket-provider';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { createLogger } from '../lib/logger';
import { countProviderErrors, countUnansweredOnScrape } from '../lib/metrics';
import { activeTracing } from '../lib/tracing';
import { createReplyonceWorker } from './create-worker';
import { unansweredQuery } from './unanswered';
import { ensureSchedules } from './schedules';
import { startMetricsServer } from './metrics-server';

/** The worker process: builds its clients, runs until SIGINT/SIGTERM, then closes them. */
async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const log = createLogger('worker', config.LOG_LEVEL);
  // The SDK's own logs (and activities' `log`) go through pino too: one JSON stream per process.
  Runtime.install({
    logger: new DefaultLogger(temporalLevel(config.LOG_LEVEL), ({ level, message, meta }) => {
      log[level.toLowerCase() as 'info'](meta ?? {}, message);
    }),
  });
  const db = createDb(config.DATABASE_URL);
  const drafter = createDrafter(config);
  const tickets = createTicketProvider(config, db);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS }).catch((error: unknown) => {
    throw new Error(
      `cannot reach Temporal at TEMPORAL_ADDRESS=${config.TEMPORAL_ADDRESS}: ${String(error)}. Is the server running?`,
    );
  });
  try {
    await db.query('SELECT 1').catch((error: unknown) => {
      throw new Error(
        `cannot reach Postgres at DATABASE_URL: ${String(error)}. Is it running, and migrated (npm run db:migrate)?`,
      );
    });
    const worker = await createReplyonceWorker({
      connection,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowBundlePath: process.env.REPLYONCE_WORKFLOW_BUNDLE,
      maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
      deps: {
        db,
        agentmail: createAgentMailClient({ apiKey: config.AGENTMAIL_API_KEY, baseUrl: config.AGENTMAIL_BASE_URL }),
        drafter,
        tickets,
        ownAddresses: config.REPLYONCE_OWN_ADDRESSES,
        replyBudgetPerSender: config.REPLY_BUDGET_PER_SENDER,
        ticketForSkipped: config.TICKET_FOR_SKIPPED,
        approvalInboxes: config.APPROVAL_REQUIRED_INBOXES,
        approvalTimeoutMs: config.APPROVAL_TIMEOUT_MS,
        reconcileAfterMs: config.SEND_RECONCILE_AFTER_MS,
        leaseMs: config.OPERATION_LEASE_MS,
        operationRetentionDays: config.OPERATION_RETENTION_DAYS,
        webhookReenable: config.WATCHDOG_REENABLE,
        watchdogWebhookIds: config.WATCHDOG_WEBHOOK_IDS,
      },
    });
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    // For the dashboard: provider calls that failed, and messages still unanswered (read at each scrape).
    countProviderErrors({
      agentmail: [config.AGENTMAIL_BASE_URL ?? 'https://api.agentmail.to'],
      model: [config.DRAFT_BASE_URL, 'https://api.openai.com', 'https://api.anthropic.com'],
      helpdesk: [config.ZENDESK_URL],
    });
    countUnansweredOnScrape(async () => (await client.workflow.count(unansweredQuery(new Date()))).count);
    // The watchdog and retention schedules (created if missing, brought up to date if not).
    // A failure here must not keep the worker from answering mail: it is logged, and the next start tries again.
    await ensureSchedules(client, config.TEMPORAL_TASK_QUEUE).then(
      (schedules) => log.info({ ...schedules, watchdogReenable: config.WATCHDOG_REENABLE }, 'schedules ready'),
      (error: unknown) =>
        log.error(
          { err: error },
          'could not create or update the watchdog and retention schedules; they run only once a worker start succeeds',
        ),
    );
    const metricsServer = await startMetricsServer(config.METRICS_PORT, config.METRICS_HOST);
    log.info(
      {
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        agentmail: config.AGENTMAIL_BASE_URL ?? 'production',
        metrics: metricsServer.url,
        drafter: drafter.name,
        tickets: tickets.name,
      },
      'worker polling',
    );
    try {
      await worker.run(); // returns after SIGINT/SIGTERM, once in-flight tasks have finished
    } finally {
      await metricsServer.close();
    }
    log.info('worker stopped');
  } finally {
    await connection.close();
    await db.end();
    await activeTracing()?.shutdown(); // flushes the last spans
  }
}

function temporalLevel(level: string): LogLevel {
  const levels: Record<string, LogLevel> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN' };
  return levels[level] ?? 'ERROR';
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});

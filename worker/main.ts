import './instrumentation'; // first: tracing patches http and pg as they load
import { Client } from '@temporalio/client';
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { createDrafter } from '../activities/draft/drafting/create-drafter';
import { handoffTopicsFor, learnedHandoffsFor } from '../activities/draft/customer-mail';
import { createTicketProvider } from '../activities/ticket/create-ticket-provider';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { createDb, postgresAuthenticationFailure } from '../lib/db';
import { createLogger, forwardSdkLog } from '../lib/logger';
import { connectTemporalWorker, describeTemporal } from '../lib/temporal-connection';
import { countProviderErrors, countUnansweredOnScrape } from '../lib/metrics';
import { activeTracing } from '../lib/tracing';
import { createReplyonceWorker } from './create-worker';
import { promoteWhenPolling, versionLabel, workerBuildId } from './deployment';
import { unansweredQuery } from './unanswered';
import { type RoutingWatch, watchDeploymentRouting } from './routing-watch';
import { ensureSchedules } from './schedules';
import { lowerCpuPriority } from './cpu-priority';
import { DEFAULT_METRICS_PORT, MetricsPortInUseError, startMetricsServer } from '../lib/metrics-server';

/** A start-up failure with a cause the operator can act on, said in one line. */
class StartupError extends Error {
  override name = 'StartupError';
}

/** The worker process: builds its clients, runs until SIGINT/SIGTERM, then closes them. */
async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const log = createLogger('worker', config.LOG_LEVEL, config.LOG_FORMAT);
  // Before Temporal's runtime starts its threads, so they inherit it.
  const priority = lowerCpuPriority(config.WORKER_NICE);
  // The SDK's own logs (and activities' and workflows' `log`) go through pino too: one stream per
  // process, without the task tokens and state chatter at info (lib/logger.ts).
  Runtime.install({
    logger: new DefaultLogger(temporalLevel(config.LOG_LEVEL), (entry) => forwardSdkLog(log, entry)),
  });
  const db = createDb(config.DATABASE_URL);
  const drafter = createDrafter(config);
  // Learned before polling, so the first message does not wait the seconds it takes (HANDOFF_EXAMPLES).
  const learned = learnedHandoffsFor(config);
  const tickets = createTicketProvider(config, db);
  const connection = await connectTemporalWorker(config.temporal).catch((error: unknown) => {
    throw new StartupError(error instanceof Error ? error.message : String(error));
  });
  // Before the Worker exists: a start-up failure here (the port taken) is reported as itself, not
  // as "Cannot close connection while Workers hold a reference to it" from the clean-up.
  let worker: Awaited<ReturnType<typeof createReplyonceWorker>> | undefined;
  // Where nobody promotes on start: whether the deployment routes runs at all (worker/routing-watch.ts).
  let routing: RoutingWatch | undefined;
  const metricsServer = await startMetricsServer({
    port: config.METRICS_PORT ?? DEFAULT_METRICS_PORT,
    host: config.METRICS_HOST,
    fallbackToFreePort: config.METRICS_PORT === undefined,
    polling: () => worker?.getState() === 'RUNNING',
    problem: () => routing?.problem() ?? null,
  }).catch(async (error: unknown) => {
    await Promise.allSettled([connection.close(), db.end()]);
    throw error;
  });
  if (metricsServer.movedFrom !== undefined) {
    log.warn(
      { metrics: metricsServer.url, taken: metricsServer.movedFrom },
      `metrics port ${metricsServer.movedFrom} is taken (another worker on this host?): serving /metrics on a free port; set METRICS_PORT to choose one`,
    );
  }
  try {
    await db.query('SELECT 1').catch((error: unknown) => {
      const refused = postgresAuthenticationFailure(error);
      throw new StartupError(
        refused
          ? `Postgres refused DATABASE_URL's credentials: ${refused}. Fix the user or password in DATABASE_URL.`
          : `cannot reach Postgres at DATABASE_URL: ${String(error)}. Is it running, and migrated (npm run db:migrate)?`,
      );
    });
    const deployment = { deploymentName: config.WORKER_DEPLOYMENT_NAME, buildId: workerBuildId(process.env) };
    worker = await createReplyonceWorker({
      connection,
      deployment,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      workflowBundlePath: process.env.REPLYONCE_WORKFLOW_BUNDLE,
      maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES,
      deps: {
        db,
        agentmail: createAgentMailClient({ apiKey: config.AGENTMAIL_API_KEY, baseUrl: config.AGENTMAIL_BASE_URL }),
        drafter,
        tickets,
        config,
      },
    });
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    // For the dashboard: provider calls that failed, and messages still unanswered (read at each scrape).
    countProviderErrors({
      agentmail: [config.AGENTMAIL_BASE_URL ?? 'https://api.agentmail.to'],
      model: [config.DRAFT_BASE_URL, 'https://api.openai.com', 'https://api.anthropic.com'],
      helpdesk: [config.ZENDESK_URL],
    });
    countUnansweredOnScrape(
      async () =>
        (
          await client.workflow.count(
            unansweredQuery(
              new Date(),
              routing?.problem() != null ? { nothingDispatched: { taskQueue: config.TEMPORAL_TASK_QUEUE } } : {},
            ),
          )
        ).count,
    );
    // The watchdog and retention schedules (created if missing, brought up to date if not).
    // A failure here must not keep the worker from answering mail: it is logged, and the next start tries again.
    const knowledgeSyncMs = config.KNOWLEDGE_DIR || config.KNOWLEDGE_URLS ? config.KNOWLEDGE_SYNC_INTERVAL : null;
    await ensureSchedules(client, config.TEMPORAL_TASK_QUEUE, { knowledgeSyncMs }).then(
      (schedules) => log.info({ ...schedules, watchdogReenable: config.WATCHDOG_REENABLE }, 'schedules ready'),
      (error: unknown) =>
        log.error(
          { err: error },
          'could not create or update the watchdog and retention schedules; they run only once a worker start succeeds',
        ),
    );
    const polling = worker;
    const running = polling.run(); // returns after SIGINT/SIGTERM, once in-flight tasks have finished
    if (config.WORKER_PROMOTE_ON_START) {
      // Dev and tests: nobody promotes a release by hand, and a version that is not current gets no new runs.
      try {
        const promoted = await promoteWhenPolling(client, deployment, {
          stopped: () => polling.getState() !== 'RUNNING',
        });
        log.info({ version: versionLabel(deployment), promoted }, 'worker version current');
      } catch (error) {
        polling.shutdown();
        await running.catch(() => undefined);
        throw new StartupError(`could not make ${versionLabel(deployment)} current: ${String(error)}`);
      }
    } else {
      // Production: a build becomes current by `npm run deploy -- promote`; until one is, say so.
      routing = watchDeploymentRouting({ client, version: deployment, log });
    }
    log.info(
      {
        temporal: describeTemporal(config.temporal),
        namespace: config.TEMPORAL_NAMESPACE,
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        agentmail: config.AGENTMAIL_BASE_URL ?? 'production',
        metrics: metricsServer.url,
        drafter: drafter.name,
        // Which subjects go to a person before any drafter is asked (HANDOFF_TOPICS, or the bundled shop's).
        handoffTopics: handoffTopicsFor(config).map((topic) => topic.name),
        // Which mail is a person's by its likeness to the examples' hand-offs, from how many examples.
        learnedHandoffs: learned && {
          examples: learned.examples,
          handoffs: learned.handoffs,
          threshold: learned.threshold,
        },
        tickets: tickets.name,
        nice: priority.nice,
        version: versionLabel(deployment),
      },
      'worker polling',
    );
    await running;
    log.info('worker stopped');
  } finally {
    routing?.stop();
    await metricsServer.close();
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
  // A problem the operator fixes (configuration, a port, an unreachable server): its message, no stack.
  // A ConfigError already says "The worker cannot start: …"; the others get that prefix once.
  if (error instanceof ConfigError) console.error(error.message);
  else if (error instanceof MetricsPortInUseError || error instanceof StartupError)
    console.error(`The worker cannot start: ${error.message}`);
  else console.error(error);
  process.exit(1);
});

import type { Client } from '@temporalio/client';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { createCatchUp, createIntake, type IntakeOptions } from '../intake/intake';
import type { AgentMailClient } from '../lib/agentmail';
import type { Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import { observeIntakeBacklog } from '../lib/metrics';
import { adminRoutes } from './admin/route';
import { reviewRoutes } from './admin/review';
import { installLoadShedding } from './load-shedding';
import type { StartupChecks } from './startup-checks';
import { webhookRoute } from './webhook/route';

export interface AppOptions {
  db: Db;
  temporal: Client;
  taskQueue: string;
  webhookSecret: string;
  deadlineMs: number;
  bodyLimitBytes: number;
  logger: Logger;
  /** INGRESS_REQUEST_TIMEOUT_MS: the whole request (headers and body) must arrive within this. */
  requestTimeoutMs?: number | undefined;
  /** INGRESS_CONNECTION_TIMEOUT_MS: an idle socket is closed after this. */
  connectionTimeoutMs?: number | undefined;
  /** INGRESS_MAX_CONCURRENT_REQUESTS: past this many in flight, 503. */
  maxConcurrentRequests?: number | undefined;
  /** The intake's tuning (tests); `relay: false` runs this app without a relay. */
  intake?: Pick<IntakeOptions, 'relay' | 'starterOptions' | 'relayOptions' | 'deadLetter'> | undefined;
  /** What api/main.ts checks at start (Postgres, Temporal): /readyz says what is missing. */
  startup?: Pick<StartupChecks, 'state' | 'problem'> | undefined;
  /** REVIEW_PROXY_USER_HEADER: the header a trusted authenticating proxy names the reviewer in (off when unset). */
  reviewProxyUserHeader?: string | undefined;
  /** REVIEW_PROXY_SECRET: the proxy's shared secret, without which REVIEW_PROXY_USER_HEADER names nobody. */
  reviewProxySecret?: string | undefined;
  /** Set (ADMIN_TOKEN) to serve /admin/*; absent, those routes do not exist (404). */
  admin?:
    | {
        token: string;
        agentmail: AgentMailClient;
        operationRetentionDays: number;
        /** Where tickets are, for POST /admin/forget (default postgres). */
        ticketProvider?: 'postgres' | 'zendesk';
      }
    | undefined;
}

/**
 * Node checks requestTimeout and headersTimeout on this period (its default is 30 s, which would
 * let a trickling client hold its socket six times longer than the timeout says).
 */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/**
 * The ingress as a Fastify app: built by tests with `inject` or real HTTP, served by api/main.ts.
 * It is the HTTP adapter of the intake (intake/): the webhook hands messages over, the admin
 * route runs catch-ups, and the app runs this replica's intake relay while it is up.
 */
export function buildApp(options: AppOptions): FastifyInstance {
  const requestTimeout = options.requestTimeoutMs ?? 5_000;
  const app = Fastify({
    // The cast keeps the instance's logger type Fastify's own, so buildApp returns a plain FastifyInstance.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: options.logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimitBytes,
    requestTimeout,
    connectionTimeout: options.connectionTimeoutMs ?? 10_000,
    // Given to Node's createServer as well: Node reads requestTimeout at construction (Fastify's
    // later `server.requestTimeout =` alone leaves a trickling client uncut; the limits test shows it).
    http: { requestTimeout, connectionsCheckingInterval: Math.min(CONNECTIONS_CHECKING_INTERVAL_MS, requestTimeout) },
    // No "incoming request" / "request completed" pair per request: the webhook route logs one line
    // per delivery (event id, workflow id, outcome) and /metrics has the timings. The two extra
    // synchronous, redacted lines cost about a tenth of the duplicate path's CPU (README, "Performance").
    logController: new LogController({ disableRequestLogging: true }),
  });

  const intake = createIntake({
    db: options.db,
    temporal: options.temporal,
    taskQueue: options.taskQueue,
    logger: options.logger,
    ...options.intake,
  });
  app.addHook('onReady', async () => intake.relay?.start());
  // preClose, not onClose: root onClose hooks run last-added first, so the pool and the Temporal
  // connection that api/main.ts closes there would be gone before the relay's last pass and the
  // starter's last marks. A request still in flight then finds the starter closed and leaves its
  // row to the relay (of another replica, or of this one's next start).
  app.addHook('preClose', async () => intake.close());
  observeIntakeBacklog(() => intake.store.backlog(options.deadlineMs));

  installLoadShedding(app, {
    maxConcurrentRequests: options.maxConcurrentRequests ?? 512,
    exempt: ['/healthz', '/readyz'],
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  // No /metrics here: this port is public (AgentMail posts to it). api/main.ts serves the metrics on
  // a listener of their own, loopback by default (API_METRICS_PORT, API_METRICS_HOST).

  // Ready means "can accept webhooks", and accepting needs Postgres alone: with Temporal away the
  // API still answers 204 and the intake backlog grows (replyonce_intake_backlog says so); the
  // body says that Temporal is missing too.
  app.get('/readyz', async (_request, reply) => {
    const postgres = await options.db
      .query({ text: 'SELECT 1', query_timeout: options.deadlineMs } as { text: string })
      .then(
        () => 'ok' as const,
        () => 'unreachable' as const,
      );
    const ready = postgres === 'ok';
    // What the start-up checks (api/startup-checks.ts) could not reach, each naming its variable.
    const startup = options.startup;
    const temporal = startup?.state('temporal');
    const missing = [
      ...(ready ? [] : [startup?.problem('postgres') ?? 'Postgres does not answer (DATABASE_URL)']),
      ...(temporal === 'unreachable'
        ? [startup?.problem('temporal') ?? 'Temporal is unreachable (TEMPORAL_ADDRESS)']
        : []),
    ];
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not_ready',
      checks: { postgres, ...(temporal ? { temporal } : {}) },
      ...(missing.length > 0 ? { missing } : {}),
    });
  });

  app.register(webhookRoute, {
    webhookSecret: options.webhookSecret,
    intake,
    deadlineMs: options.deadlineMs,
    bodyLimitBytes: options.bodyLimitBytes,
  });

  if (options.admin) {
    const { token, agentmail, operationRetentionDays } = options.admin;
    const catchUp = createCatchUp({
      db: options.db,
      agentmail,
      taskQueue: options.taskQueue,
      operationRetentionDays,
      temporal: options.temporal,
    });
    const erasure = {
      db: options.db,
      agentmail,
      temporal: options.temporal,
      ticketProvider: options.admin.ticketProvider ?? 'postgres',
    };
    app.register(adminRoutes, { token, catchUp, onHandedOver: () => intake.relay?.wake(), erasure });
  }
  // Reviewers bring their own tokens (review/reviewers.ts): served whether or not ADMIN_TOKEN is set.
  app.register(reviewRoutes, {
    db: options.db,
    temporal: options.temporal,
    adminToken: options.admin?.token,
    proxyUserHeader: options.reviewProxyUserHeader,
    proxySecret: options.reviewProxySecret,
  });

  // 5xx details stay in the log: the sender only needs to know to retry.
  app.setErrorHandler((error: { statusCode?: number; message: string }, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error, eventUrl: request.url }, 'request failed; the sender will retry');
      return reply
        .code(500)
        .send({ error: 'internal_error', message: 'Temporarily unable to accept the event; retry later.' });
    }
    return reply.code(status).send({ error: 'bad_request', message: error.message });
  });

  return app;
}

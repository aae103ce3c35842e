import type { Client } from '@temporalio/client';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AgentMailClient } from '../lib/agentmail';
import type { Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import { registry } from '../lib/metrics';
import { adminRoutes } from './admin/route';
import { InboxCursors } from './catch-up/inbox-cursors';
import { InboundEvents } from './inbound-events';
import { webhookRoute } from './webhook/route';

export interface AppOptions {
  db: Db;
  temporal: Client;
  taskQueue: string;
  webhookSecret: string;
  deadlineMs: number;
  bodyLimitBytes: number;
  logger: Logger;
  /** Set (ADMIN_TOKEN) to serve /admin/*; absent, those routes do not exist (404). */
  admin?: { token: string; agentmail: AgentMailClient; operationRetentionDays: number } | undefined;
}

/** The ingress as a Fastify app: built by tests with `inject` or real HTTP, served by api/main.ts. */
export function buildApp(options: AppOptions): FastifyInstance {
  const app = Fastify({
    // The cast keeps the instance's logger type Fastify's own, so buildApp returns a plain FastifyInstance.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: options.logger as FastifyBaseLogger,
    bodyLimit: options.bodyLimitBytes,
    // No "incoming request" / "request completed" pair per request: the webhook route logs one line
    // per delivery (event id, workflow id, outcome) and /metrics has the timings. The two extra
    // synchronous, redacted lines cost about a tenth of the duplicate path's CPU (README, "Performance").
    logController: new LogController({ disableRequestLogging: true }),
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/metrics', async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));

  app.get('/readyz', async (_request, reply) => {
    const deadline = new Date(Date.now() + options.deadlineMs);
    const [postgres, temporal] = await Promise.allSettled([
      options.db.query('SELECT 1'),
      options.temporal.withDeadline(deadline, () => options.temporal.workflowService.getSystemInfo({})),
    ]);
    const checks = {
      postgres: postgres.status === 'fulfilled' ? 'ok' : 'unreachable',
      temporal: temporal.status === 'fulfilled' ? 'ok' : 'unreachable',
    };
    const ready = postgres.status === 'fulfilled' && temporal.status === 'fulfilled';
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });

  app.register(webhookRoute, {
    webhookSecret: options.webhookSecret,
    temporal: options.temporal,
    taskQueue: options.taskQueue,
    events: new InboundEvents(options.db),
    deadlineMs: options.deadlineMs,
    bodyLimitBytes: options.bodyLimitBytes,
  });

  if (options.admin) {
    const { token, agentmail, operationRetentionDays } = options.admin;
    const catchUp = {
      agentmail,
      temporal: options.temporal,
      taskQueue: options.taskQueue,
      cursors: new InboxCursors(options.db),
      operationRetentionDays,
    };
    app.register(adminRoutes, { token, catchUp });
  }

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

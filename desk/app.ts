import type { Client } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { AgentMailClient } from '../lib/agentmail';
import type { Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import { zodValidatorCompiler } from './forms';
import { cookieNames, securityPlugin } from './plugins/security';
import { sessionPlugin } from './plugins/session';
import { frame, htmlReply } from './respond';
import { NotFound, ReviewClient } from './review-client';
import { assetRoutes } from './routes/assets';
import { messageRoutes } from './routes/messages';
import { queueRoutes } from './routes/queue';
import { rehearsalRoutes } from './routes/rehearsals';
import { signInRoutes } from './routes/sign-in';
import { threadRoutes } from './routes/threads';
import { problemPage } from './views';

export interface DeskOptions {
  db: Db;
  temporal: Client;
  agentmail: AgentMailClient;
  logger: Logger;
  /** How long a sign-in lasts. */
  sessionTtlMs: number;
  /** DESK_PUBLIC_URL: https here makes every cookie Secure and `__Host-`. */
  publicUrl: string;
  /** DESK_TRUST_PROXY: believe X-Forwarded-Proto/-For from the proxy in front (Secure cookies when it says https). */
  trustProxy: boolean;
  signInAttemptsPerMinute: number;
  /** How long the desk waits for Temporal (a query, an Update) before saying so. */
  temporalDeadlineMs?: number;
}

/** The session cookie's name on loopback http (behind TLS: `__Host-desk_session`). */
export const SESSION_COOKIE = cookieNames(false).session;

/**
 * The review desk: a Fastify app of its own (desk/main.ts serves it on DESK_HOST:DESK_PORT,
 * never on the webhook's port). Laid out as fastify/demo is: plugins for what every route shares
 * (plugins/security.ts: TLS-only outside loopback, CSP, cookies, CSRF bound to the session, rate
 * limit; plugins/session.ts: who is signed in), one file per route group (routes/), the review
 * client (review-client.ts: Temporal, the store, AgentMail), the forms' rules (forms.ts) and the
 * pages (views.ts). Signed-in reviewers only; the pages run no script.
 */
export function buildDesk(options: DeskOptions): FastifyInstance {
  const deadlineMs = options.temporalDeadlineMs ?? 10_000;
  const app = Fastify({
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: options.logger as FastifyBaseLogger,
    trustProxy: options.trustProxy,
    bodyLimit: 256 * 1024,
    // Fastify's own request lines (every stylesheet, every favicon 404) would drown the message
    // lines at info: the hook below logs each request at debug instead.
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.setValidatorCompiler(zodValidatorCompiler);
  app.addHook('onResponse', async (request, reply) => {
    request.log.debug(
      { method: request.method, url: request.url.split('?')[0], statusCode: reply.statusCode, ms: reply.elapsedTime },
      'desk request',
    );
  });

  void app.register(securityPlugin, { httpsOnly: options.publicUrl.startsWith('https:') });
  void app.register(sessionPlugin, { db: options.db, ttlMs: options.sessionTtlMs });

  const client = new ReviewClient({
    db: options.db,
    temporal: options.temporal,
    agentmail: options.agentmail,
    deadlineMs,
  });
  // Routes once the plugins above have loaded (the rate limit attaches to routes as they are added).
  void app.register(assetRoutes);
  void app.register(signInRoutes, { db: options.db, attemptsPerMinute: options.signInAttemptsPerMinute });
  void app.register(queueRoutes, { temporal: options.temporal, agentmail: options.agentmail, deadlineMs });
  void app.register(messageRoutes, { client, deadlineMs });
  void app.register(threadRoutes, { db: options.db, temporal: options.temporal, deadlineMs });
  void app.register(rehearsalRoutes, { db: options.db });

  app.setNotFoundHandler(async (request, reply) =>
    htmlReply(reply, 404, problemPage(frame(request, reply), 'Not found', 'There is no such page or message for you.')),
  );

  app.setErrorHandler(async (error: { statusCode?: number; code?: string; message: string }, request, reply) => {
    if (error instanceof NotFound)
      return htmlReply(
        reply,
        404,
        problemPage(
          frame(request, reply),
          'Not found',
          'There is no such message, or it is not in an inbox you review.',
        ),
      );
    const status = error.statusCode ?? 500;
    if (status === 403)
      return htmlReply(
        reply,
        403,
        problemPage(
          frame(request, reply),
          'Form expired',
          'This form did not carry a valid security token (it may be old, from before you signed in again, or not from the desk). Reload the page and try again.',
        ),
      );
    if (status === 429)
      return htmlReply(
        reply,
        429,
        problemPage(
          frame(request, reply),
          'Too many attempts',
          'Too many sign-in attempts: wait a minute, then try again.',
        ),
      );
    if (status < 500)
      return htmlReply(reply, status, problemPage(frame(request, reply), 'Not understood', error.message));
    request.log.error({ err: error, url: request.url.split('?')[0] }, 'desk request failed');
    // Only reads fail here: a verdict's own failure is said by its route ("not confirmed yet").
    return htmlReply(
      reply,
      503,
      problemPage(
        frame(request, reply),
        'Not available',
        'The desk could not reach Temporal or Postgres just now. Try again in a moment; reload to see what stands.',
      ),
    );
  });

  return app;
}

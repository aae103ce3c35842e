import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import fastifyHelmet from '@fastify/helmet';
import fastifyRateLimit from '@fastify/rate-limit';
import { ApplicationFailure, type Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  draftProblem,
  FailureType,
  INBOUND_MESSAGE_WORKFLOW,
  normalizedDraft,
  reviewStateQuery,
  type ReviewState,
  reviewUpdate,
  SearchAttributes,
} from '../contract';
import { OperationStore } from '../activities/operation-store/store';
import type { StoredDraft } from '../activities/draft/draft-store';
import type { AgentMailClient } from '../lib/agentmail';
import type { Db } from '../lib/db';
import type { Logger } from '../lib/logger';
import { isAgentMailError, providerErrorText } from '../lib/provider-errors';
import { authenticateReviewer } from '../review/reviewers';
import { DeskSessions, mayReview, type SignedIn } from './sessions';
import {
  type Citation,
  type Frame,
  messagePage,
  type MessageView,
  previewPage,
  problemPage,
  queuePage,
  signInPage,
  STYLESHEET,
  type ThreadMessage,
} from './views';
import { waitingMessages } from './waiting';

export interface DeskOptions {
  db: Db;
  temporal: Client;
  agentmail: AgentMailClient;
  logger: Logger;
  /** How long a sign-in lasts. */
  sessionTtlMs: number;
  /** DESK_PUBLIC_URL: https here makes every cookie Secure. */
  publicUrl: string;
  /** DESK_TRUST_PROXY: believe X-Forwarded-Proto/-For from the proxy in front (Secure cookies when it says https). */
  trustProxy: boolean;
  signInAttemptsPerMinute: number;
  /** How long the desk waits for Temporal (a query, an Update) before saying so. */
  temporalDeadlineMs?: number;
}

export const SESSION_COOKIE = 'desk_session';

declare module 'fastify' {
  interface FastifyRequest {
    reviewer: SignedIn | null;
    sessionId: string | null;
  }
}

class NotFound extends Error {}

/**
 * The review desk: a Fastify app of its own (desk/main.ts serves it on DESK_HOST:DESK_PORT,
 * never on the webhook's port). Signed-in reviewers only; every form carries a CSRF token; the
 * Content-Security-Policy is `default-src 'self'` and the pages run no script.
 */
export function buildDesk(options: DeskOptions): FastifyInstance {
  const sessions = new DeskSessions(options.db, options.sessionTtlMs);
  const store = new OperationStore(options.db);
  const deadlineMs = options.temporalDeadlineMs ?? 10_000;
  const httpsOnly = options.publicUrl.startsWith('https:');
  const app = Fastify({
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
    loggerInstance: options.logger as FastifyBaseLogger,
    trustProxy: options.trustProxy,
    bodyLimit: 256 * 1024,
  });
  const secure = (request: FastifyRequest) => httpsOnly || request.protocol === 'https';
  const cookieOptions = (request: FastifyRequest) => ({
    path: '/',
    httpOnly: true,
    sameSite: 'strict' as const,
    secure: secure(request),
  });

  void app.register(fastifyHelmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
        objectSrc: ["'none'"],
      },
    },
    // Only over TLS does HSTS mean anything; on loopback http it would only confuse a browser later.
    strictTransportSecurity: httpsOnly,
  });
  void app.register(fastifyCookie);
  void app.register(fastifyFormbody);
  void app.register(fastifyCsrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: 'desk_csrf',
    cookieOpts: { path: '/', httpOnly: true, sameSite: 'strict', secure: httpsOnly },
  });
  void app.register(fastifyRateLimit, { global: false });
  // The plugin's hook, as a function of its own (it reads `this` only as the instance).
  const csrf = (request: FastifyRequest, reply: FastifyReply, done: () => void) =>
    app.csrfProtection(request, reply, done);
  app.decorateRequest('reviewer', null);
  app.decorateRequest('sessionId', null);

  const frame = (request: FastifyRequest, reply: FastifyReply): Frame => ({
    reviewer: request.reviewer,
    csrf: reply.generateCsrf({ secure: secure(request) }),
  });
  const htmlReply = (reply: FastifyReply, code: number, body: string) =>
    reply.code(code).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(body);

  const PUBLIC = new Set(['/sign-in', '/desk.css', '/healthz']);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    if (PUBLIC.has(path)) return;
    const id = request.cookies[SESSION_COOKIE];
    const reviewer = id ? await sessions.find(id) : null;
    if (reviewer === null || id === undefined) {
      if (id !== undefined) void reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
      if (request.method === 'GET') return reply.code(303).redirect('/sign-in');
      return htmlReply(reply, 401, problemPage(frame(request, reply), 'Signed out', 'Sign in again to continue.'));
    }
    request.reviewer = reviewer;
    request.sessionId = id;
  });

  // Routes in a plugin of their own, so they are added once the plugins above have loaded
  // (the rate limit attaches to routes as they are added).
  void app.register(async (app) => {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/desk.css', async (_request, reply) =>
      reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(STYLESHEET),
    );

    app.get('/sign-in', async (request, reply) => htmlReply(reply, 200, signInPage(frame(request, reply), null)));

    app.post<{ Body: { token?: string } }>(
      '/sign-in',
      {
        preHandler: csrf,
        config: { rateLimit: { max: options.signInAttemptsPerMinute, timeWindow: 60_000 } },
      },
      async (request, reply) => {
        const token = typeof request.body?.token === 'string' ? request.body.token.trim() : '';
        const reviewer = token ? await authenticateReviewer(options.db, token) : null;
        if (reviewer === null) {
          request.log.warn('desk sign-in refused: unknown or revoked token');
          return htmlReply(
            reply,
            401,
            signInPage(
              frame(request, reply),
              'That token is not valid, or it has been revoked. Ask an operator for a new one.',
            ),
          );
        }
        const session = await sessions.create(reviewer.id);
        request.log.info({ reviewer: reviewer.id }, 'desk sign-in');
        return reply
          .setCookie(SESSION_COOKIE, session.id, { ...cookieOptions(request), expires: session.expiresAt })
          .code(303)
          .redirect('/');
      },
    );

    app.post('/sign-out', { preHandler: csrf }, async (request, reply) => {
      if (request.sessionId) await sessions.end(request.sessionId);
      return reply.clearCookie(SESSION_COOKIE, cookieOptions(request)).code(303).redirect('/sign-in');
    });

    app.get<{ Querystring: { inbox?: string } }>('/', async (request, reply) => {
      const reviewer = request.reviewer as SignedIn;
      const all = await options.temporal.connection.withDeadline(Date.now() + deadlineMs, () =>
        waitingMessages(options.temporal, reviewer),
      );
      const inbox = request.query.inbox?.trim() || null;
      const inboxes = [...new Set([...(reviewer.inboxes ?? []), ...all.messages.map((m) => m.inboxId)])].sort();
      const messages = inbox === null ? all.messages : all.messages.filter((m) => m.inboxId === inbox);
      return htmlReply(
        reply,
        200,
        queuePage(frame(request, reply), { messages, more: all.more, inboxes, inbox, now: new Date() }),
      );
    });

    /** The message behind a workflow id, when this reviewer may see it; NotFound otherwise (also for other rights). */
    async function messageOf(reviewer: SignedIn, workflowId: string) {
      const description = await options.temporal.connection
        .withDeadline(Date.now() + deadlineMs, () => options.temporal.workflow.getHandle(workflowId).describe())
        .catch((error: unknown) => {
          if (error instanceof WorkflowNotFoundError) throw new NotFound();
          throw error;
        });
      const inboxId = description.typedSearchAttributes.get(SearchAttributes.InboxId);
      const messageId = description.typedSearchAttributes.get(SearchAttributes.MessageId);
      if (description.type !== INBOUND_MESSAGE_WORKFLOW || !inboxId || !messageId || !mayReview(reviewer, inboxId))
        throw new NotFound();
      return { inboxId, messageId, handle: options.temporal.workflow.getHandle(workflowId) };
    }

    async function view(
      reviewer: SignedIn,
      workflowId: string,
      extra: Pick<MessageView, 'notice' | 'editing'>,
    ): Promise<MessageView> {
      const message = await messageOf(reviewer, workflowId);
      const state: ReviewState = await options.temporal.connection.withDeadline(Date.now() + deadlineMs, () =>
        message.handle.query(reviewStateQuery),
      );
      const [draft, thread] = await Promise.all([
        state.draftKey ? store.completed<StoredDraft & { citations?: unknown }>(state.draftKey, 'draft') : undefined,
        readThread(options.agentmail, message.inboxId, message.messageId),
      ]);
      return {
        workflowId,
        inboxId: message.inboxId,
        state,
        draft: draft ? { text: draft.text, citations: citationsOf(draft.cited ?? draft.citations) } : null,
        thread,
        ...extra,
      };
    }

    const NOTICES: Record<string, string> = {
      approve: 'Approved: the reply is on its way.',
      edit: 'Approved with your edit: the edited reply is on its way.',
      reject: 'Rejected: nothing will be sent.',
    };

    app.get<{ Params: { id: string }; Querystring: { done?: string } }>('/messages/:id', async (request, reply) => {
      const done = request.query.done;
      const notice = done && NOTICES[done] ? { kind: 'ok' as const, text: NOTICES[done] } : null;
      const shown = await view(request.reviewer as SignedIn, request.params.id, { notice, editing: null });
      return htmlReply(reply, 200, messagePage(frame(request, reply), shown));
    });

    app.post<{ Params: { id: string }; Body: { revision?: string; text?: string } }>(
      '/messages/:id/preview',
      { preHandler: csrf },
      async (request, reply) => {
        const reviewer = request.reviewer as SignedIn;
        const shown = await view(reviewer, request.params.id, { notice: null, editing: null });
        const revision = Number(request.body?.revision);
        const text = typeof request.body?.text === 'string' ? lineFeeds(request.body.text) : '';
        const problem = draftProblem(text);
        if (problem !== null || shown.draft === null || !Number.isInteger(revision)) {
          const notice = {
            kind: 'error' as const,
            text: `The edited reply cannot be sent: it ${problem ?? 'is not waiting any more'}.`,
          };
          return htmlReply(reply, 422, messagePage(frame(request, reply), { ...shown, notice, editing: text }));
        }
        return htmlReply(
          reply,
          200,
          previewPage(frame(request, reply), {
            workflowId: request.params.id,
            inboxId: shown.inboxId,
            revision,
            before: shown.draft.text,
            after: normalizedDraft(text),
          }),
        );
      },
    );

    app.post<{ Params: { id: string }; Body: { revision?: string; verdict?: string; text?: string } }>(
      '/messages/:id/review',
      { preHandler: csrf },
      async (request, reply) => {
        const reviewer = request.reviewer as SignedIn;
        const workflowId = request.params.id;
        const message = await messageOf(reviewer, workflowId);
        const verdict = request.body?.verdict;
        const revision = Number(request.body?.revision);
        const text =
          typeof request.body?.text === 'string' && request.body.text !== '' ? lineFeeds(request.body.text) : undefined;
        if ((verdict !== 'approve' && verdict !== 'reject') || !Number.isInteger(revision))
          return htmlReply(
            reply,
            400,
            problemPage(frame(request, reply), 'Not understood', 'That form was incomplete.'),
          );
        // The reviewer is the signed-in one, from the session: never a field of the form.
        const review = { verdict, revision, reviewer: reviewer.id, ...(verdict === 'approve' && text ? { text } : {}) };
        try {
          await options.temporal.connection.withDeadline(Date.now() + deadlineMs, () =>
            message.handle.executeUpdate(reviewUpdate, { args: [review] }),
          );
        } catch (error) {
          const failure = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
          if (
            failure instanceof ApplicationFailure &&
            (failure.type === FailureType.ReviewRefused || failure.type === FailureType.InvalidReview)
          ) {
            const stale = failure.type === FailureType.ReviewRefused;
            request.log.info({ workflowId, reviewer: reviewer.id, refused: failure.type }, 'desk verdict refused');
            const notice = {
              kind: 'error' as const,
              text: stale
                ? `Your verdict was not applied: the reply changed while you looked (${failure.message}). What stands is shown below.`
                : `Your verdict was not applied: ${failure.message}.`,
            };
            const shown = await view(reviewer, workflowId, { notice, editing: stale ? null : (text ?? null) });
            return htmlReply(reply, stale ? 409 : 422, messagePage(frame(request, reply), shown));
          }
          if (error instanceof WorkflowNotFoundError) {
            // The run has finished (another verdict was applied and the reply went, or it was
            // rejected): its reviewState still says what stands.
            const notice = {
              kind: 'error' as const,
              text: 'Your verdict was not applied: this message has been decided already. What stands is shown below.',
            };
            const shown = await view(reviewer, workflowId, { notice, editing: null });
            return htmlReply(reply, 409, messagePage(frame(request, reply), shown));
          }
          throw error;
        }
        request.log.info(
          { workflowId, reviewer: reviewer.id, verdict, revision, edited: text !== undefined },
          'desk verdict accepted',
        );
        const done = verdict === 'reject' ? 'reject' : text ? 'edit' : 'approve';
        return reply.code(303).redirect(`/messages/${encodeURIComponent(workflowId)}?done=${done}`);
      },
    );
  });

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
          'This form did not carry a valid security token (it may be old, or not from the desk). Reload the page and try again.',
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
    return htmlReply(
      reply,
      503,
      problemPage(
        frame(request, reply),
        'Not available',
        'The desk could not reach Temporal or Postgres just now. Nothing was changed; try again in a moment.',
      ),
    );
  });

  return app;
}

/** A browser submits a textarea's line breaks as CRLF; the draft and the sent text use LF. */
const lineFeeds = (text: string): string => text.replace(/\r\n?/g, '\n');

/** The customer's thread, read from AgentMail now (never stored by us); a failure is said on the page. */
async function readThread(
  agentmail: AgentMailClient,
  inboxId: string,
  messageId: string,
): Promise<ThreadMessage[] | { problem: string }> {
  try {
    const message = await agentmail.inboxes.messages.get(inboxId, messageId);
    const thread = await agentmail.inboxes.threads.get(inboxId, message.threadId);
    return thread.messages
      .slice()
      .sort((a, b) => new Date(a.timestamp).getTime() - new Date(b.timestamp).getTime())
      .map((m) => ({
        from: m.from,
        at: new Date(m.timestamp),
        subject: m.subject ?? null,
        text: m.extractedText ?? m.text ?? m.preview ?? '(no text part)',
        isThisOne: m.messageId === messageId,
      }));
  } catch (error) {
    const why = isAgentMailError(error) ? providerErrorText(error) : 'no answer';
    return { problem: `The thread could not be read from AgentMail just now (${why}). Reload to try again.` };
  }
}

/** Cited articles, where the draft has them (the knowledge step stores them beside the text). */
function citationsOf(value: unknown): Citation[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item: unknown): Citation[] => {
    if (typeof item === 'string') return [{ title: item, url: null }];
    if (item && typeof item === 'object') {
      const record = item as Record<string, unknown>;
      const title = [record.title, record.id, record.url].find((v): v is string => typeof v === 'string');
      const url = typeof record.url === 'string' && /^https?:\/\//.test(record.url) ? record.url : null;
      const heading = typeof record.heading === 'string' ? record.heading : null;
      const text = typeof record.text === 'string' ? record.text : null;
      return title ? [{ title, url, heading, text }] : [];
    }
    return [];
  });
}

import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import { ApiError, errorBodyFor } from './errors';
import { decodedPath } from './faults';
import { controlRoutes } from './routes/control';
import { controlWebhookRoutes } from './routes/control-webhooks';
import { draftRoutes } from './routes/drafts';
import { indexRoute } from './routes/index-page';
import { messageRoutes } from './routes/messages';
import { resourceRoutes } from './routes/resources';
import { threadRoutes } from './routes/threads';
import { SandboxState } from './state';
import { DEFAULT_DELIVERY_TIMEOUT_MS, DEFAULT_RETRY_SCHEDULE_MS, WebhookDispatcher } from './webhooks';

export interface SandboxOptions {
  /** The one Bearer token the API accepts. */
  apiKey: string;
  /** `whsec_…`, the Svix signing secret webhooks are signed with. */
  webhookSecret: string;
  /** Where webhooks go; may also be set later with POST /_sandbox/webhook. */
  webhookUrl?: string | undefined;
  /** Delay before each delivery attempt (ms), Svix-style; its length is the number of attempts. */
  retryScheduleMs?: number[] | undefined;
  /** A delivery without a 2xx within this time counts as failed. */
  deliveryTimeoutMs?: number | undefined;
  /**
   * Status for a missing or wrong API key. The brief asks for 401; AgentMail's knowledge base
   * ("API 403 error") says a bad key gets 403, so tests of that path can switch.
   */
  authFailureStatus?: 401 | 403 | undefined;
  /** A pino-compatible logger, or true for Fastify's default one. Off when absent. */
  logger?: FastifyBaseLogger | boolean | undefined;
}

export interface Sandbox {
  app: FastifyInstance;
  state: SandboxState;
  /** Every route registered, `METHOD /path` (the index test compares them with GET /_sandbox). */
  routes: string[];
}

/** The local stand-in for AgentMail: its /v0 API as the SDK calls it, plus /_sandbox control. */
export function buildSandbox(options: SandboxOptions): Sandbox {
  if (!options.webhookSecret.startsWith('whsec_')) throw new Error('webhookSecret must start with whsec_');
  const app = Fastify({
    ...(typeof options.logger === 'object' ? { loggerInstance: options.logger } : { logger: options.logger ?? false }),
    // A line per request only at debug: at info the sandbox says what matters (deliveries, failures).
    logController: new LogController({
      disableRequestLogging: typeof options.logger !== 'object' || !['debug', 'trace'].includes(options.logger.level),
    }),
    // Message-IDs are long once percent-encoded; Fastify's default cap (100) would 404 them.
    routerOptions: { maxParamLength: 2048 },
  });
  const webhooks = new WebhookDispatcher({
    secret: options.webhookSecret,
    url: options.webhookUrl,
    retryScheduleMs: options.retryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS,
    timeoutMs: options.deliveryTimeoutMs ?? DEFAULT_DELIVERY_TIMEOUT_MS,
    onError: (error, event) => app.log.error({ err: error, event_id: event.event_id }, 'webhook delivery crashed'),
  });
  const state = new SandboxState(webhooks);
  const routes: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push(`${method} ${route.url}`);
  });
  const expected = `Bearer ${options.apiKey}`;
  const authFailure = options.authFailureStatus ?? 401;

  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/v0/')) return;
    if (request.method !== 'GET' && request.method !== 'HEAD')
      state.writes.push({ method: request.method, path: decodedPath(request.url), at: state.clock.iso() });
    if (request.headers.authorization !== expected) {
      return reply.code(authFailure).send(errorBodyFor(authFailure, 'Missing or invalid API key'));
    }
    const fault = state.faults.draw(request.raw, request.method, decodedPath(request.url));
    if (fault?.action === 'status') {
      const status = fault.status ?? 500;
      return reply.code(status).send(errorBodyFor(status, fault.message ?? `injected fault: status ${status}`));
    }
    if (fault?.action === 'drop-before-commit') {
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }
    return undefined;
  });

  // After the handler did its work: delay the answer, or drop it (the work stays done).
  app.addHook('onSend', async (request, _reply, payload) => {
    await state.faults.delay(request.raw);
    if (state.faults.drawn(request.raw)?.action === 'drop-after-commit') request.raw.socket.destroy();
    return payload;
  });

  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) return reply.code(error.status).send(error.body);
    const status = error.statusCode ?? 500;
    if (status < 500) return reply.code(status).send(errorBodyFor(status, error.message));
    request.log.error({ err: error }, 'sandbox handler failed');
    return reply.code(500).send(errorBodyFor(500, 'Internal server error'));
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBodyFor(404, `no route ${request.method} ${request.url.split('?')[0]}`)),
  );

  messageRoutes(app, state);
  threadRoutes(app, state);
  draftRoutes(app, state);
  resourceRoutes(app, state);
  controlRoutes(app, state);
  controlWebhookRoutes(app, state);
  indexRoute(app);
  app.addHook('onClose', async () => webhooks.close());
  return { app, state, routes };
}

import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { parseSince, type CatchUpCounts, type CatchUpSummary } from '../../intake/catch-up';
import { classifyCatchUpError, type CatchUp } from '../../intake/intake';
import type { ErasureDeps } from '../../privacy/erase';
import { forgetRoutes } from './forget';

export interface AdminRouteOptions {
  /** The bearer token (ADMIN_TOKEN); without one these routes are not registered at all. */
  token: string;
  catchUp: CatchUp;
  /** A catch-up handed rows over: the relay may start them now rather than at its next poll. */
  onHandedOver?: () => void;
  /** POST /admin/forget (api/admin/forget.ts): erasing a customer, behind the same token. */
  erasure?: ErasureDeps;
}

const replayBody = z
  .object({
    inbox_id: z.string().min(1).optional(),
    inbox_ids: z.array(z.string().min(1)).min(1).max(100).optional(),
    since: z.string().min(1).optional(),
  })
  .refine(
    (body) => (body.inbox_id === undefined) !== (body.inbox_ids === undefined),
    'give inbox_id or inbox_ids (one of them)',
  );

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * /admin/*: operator actions over HTTP, behind `Authorization: Bearer <ADMIN_TOKEN>`.
 *
 * POST /admin/replay {"inbox_id": "...", "since": "2025-12-01T08:00:00Z" | "36h"}: the catch-up of
 * `npm run replay`, answered with its summary once every page is handed over to the intake (the
 * relay starts the workflows). A client that hangs up stops it between pages; running it again
 * is safe.
 *
 * Verdicts are not an operator's: /admin/review takes a reviewer's own token (api/admin/review.ts).
 */
export const adminRoutes: FastifyPluginAsync<AdminRouteOptions> = async (app: FastifyInstance, options) => {
  const expected = digest(options.token);

  // Inside this plugin only (encapsulation): the webhook route keeps its own rules.
  app.addHook('onRequest', async (request, reply) => {
    const header = request.headers.authorization ?? '';
    const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
    // Compared as digests: equal length, constant time, whatever was sent.
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      request.log.warn({ url: request.url }, 'admin request refused: missing or wrong bearer token');
      return reply
        .code(401)
        .header('www-authenticate', 'Bearer')
        .send({ error: 'unauthorized', message: 'A valid Authorization: Bearer <ADMIN_TOKEN> header is required.' });
    }
  });

  if (options.erasure) await app.register(forgetRoutes, { erasure: options.erasure });

  app.post('/admin/replay', async (request, reply) => {
    const body = replayBody.safeParse(request.body);
    if (!body.success)
      return reply
        .code(400)
        .send({ error: 'bad_request', message: body.error.issues.map((i) => i.message).join('; ') });
    const inboxIds = body.data.inbox_ids ?? [body.data.inbox_id as string];

    const hangUp = new AbortController();
    reply.raw.once('close', () => reply.raw.writableFinished || hangUp.abort());
    const summaries: CatchUpSummary[] = [];
    try {
      const since = body.data.since === undefined ? undefined : parseSince(body.data.since);
      for (const inboxId of inboxIds) {
        if (hangUp.signal.aborted) break;
        const summary = await options.catchUp.run({
          inboxId,
          since,
          signal: hangUp.signal,
          onProgress: () => options.onHandedOver?.(),
        });
        request.log.info({ ...summary, admin: 'replay' }, 'catch-up replay finished');
        summaries.push(summary);
      }
    } catch (error) {
      const failure = classifyCatchUpError(error);
      if (failure?.kind === 'request') return reply.code(400).send({ error: 'bad_request', message: failure.message });
      if (failure?.kind === 'no_inbox') {
        return reply
          .code(404)
          .send({ error: 'inbox_not_found', message: `AgentMail has no inbox ${inboxIds[summaries.length]}` });
      }
      // What AgentMail said, as status and name: its body (which the SDK copies into the message) stays here.
      if (failure?.kind === 'provider') {
        request.log.error({ admin: 'replay', agentmail: failure.message }, 'catch-up replay failed at AgentMail');
        return reply
          .code(502)
          .send({ error: 'agentmail_error', message: `${failure.message}; the replay can be run again` });
      }
      throw error;
    }
    return reply.send({ summaries, totals: totals(summaries) });
  });
};

function totals(summaries: CatchUpSummary[]): CatchUpCounts {
  const sum = (pick: (s: CatchUpSummary) => number) => summaries.reduce((n, s) => n + pick(s), 0);
  return {
    listed: sum((s) => s.listed),
    handedOver: sum((s) => s.handedOver),
    alreadyHandedOver: sum((s) => s.alreadyHandedOver),
    alreadyAnswered: sum((s) => s.alreadyAnswered),
    stoppedByOperator: sum((s) => s.stoppedByOperator),
    skipped: sum((s) => s.skipped),
  };
}

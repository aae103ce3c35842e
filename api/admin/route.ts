import { createHash, timingSafeEqual } from 'node:crypto';
import { type Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { draftProblem, reviewUpdate } from '../../contract';
import { inboundWorkflowId } from '../../lib/hashing';
import { parseSince, type CatchUpCounts, type CatchUpSummary } from '../../intake/catch-up';
import { classifyCatchUpError, type CatchUp } from '../../intake/intake';

export interface AdminRouteOptions {
  /** The bearer token (ADMIN_TOKEN); without one these routes are not registered at all. */
  token: string;
  catchUp: CatchUp;
  /** For the review Update. */
  temporal: Client;
  /** A catch-up handed rows over: the relay may start them now rather than at its next poll. */
  onHandedOver?: () => void;
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

const reviewBody = z.object({
  inbox_id: z.string().min(1),
  message_id: z.string().min(1),
  verdict: z.enum(['approve', 'reject']),
  /** The edited reply: the one rule for a reply's text (contract/draft-text.ts), as the workflow's Update applies it. */
  text: z
    .string()
    .superRefine((text, ctx) => {
      const problem = draftProblem(text);
      if (problem !== null) ctx.addIssue({ code: 'custom', message: `the text ${problem}` });
    })
    .optional(),
  reviewer: z.string().min(1).max(200).optional(),
});

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * /admin/*: operator actions over HTTP, behind `Authorization: Bearer <ADMIN_TOKEN>`.
 *
 * POST /admin/replay {"inbox_id": "...", "since": "2025-12-01T08:00:00Z" | "36h"}: the catch-up of
 * `npm run replay`, answered with its summary once every page is handed over to the intake (the
 * relay starts the workflows). A client that hangs up stops it between pages; running it again
 * is safe.
 *
 * POST /admin/review {"inbox_id", "message_id", "verdict": "approve"|"reject", "text"?, "reviewer"?}:
 * a person's verdict on a reply awaiting approval, sent as the workflow's `review` Update, so the
 * answer says whether the workflow accepted it.
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

  app.post('/admin/review', async (request, reply) => {
    const body = reviewBody.safeParse(request.body);
    if (!body.success)
      return reply.code(400).send({
        error: 'bad_request',
        message: body.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      });
    try {
      return reply.send(await sendReview(options, body.data));
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        return reply.code(404).send({
          error: 'not_found',
          message: 'No workflow for that message is waiting (unknown message, or already finished).',
        });
      }
      if (error instanceof WorkflowUpdateFailedError)
        return reply.code(422).send({ error: 'review_refused', message: error.cause?.message ?? error.message });
      throw error;
    }
  });
};

async function sendReview(options: AdminRouteOptions, body: z.infer<typeof reviewBody>) {
  const handle = options.temporal.workflow.getHandle(
    inboundWorkflowId({ inboxId: body.inbox_id, messageId: body.message_id }),
  );
  const review = {
    verdict: body.verdict,
    ...(body.text ? { text: body.text } : {}),
    ...(body.reviewer ? { reviewer: body.reviewer } : {}),
  };
  return handle.executeUpdate(reviewUpdate, { args: [review] });
}

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

import { createHash, timingSafeEqual } from 'node:crypto';
import { ApplicationFailure, type Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  draftProblem,
  FailureType,
  OperationKind,
  type ReviewInput,
  type ReviewState,
  reviewStateQuery,
  reviewUpdate,
} from '../../contract';
import type { StoredDraft } from '../../activities/draft/draft-store';
import { OperationStore } from '../../activities/operation-store/store';
import type { Db } from '../../lib/db';
import { inboundWorkflowId } from '../../lib/hashing';
import { listReviewAudit } from '../../review/audit';
import { authenticateReviewer, mayReview, type Reviewer } from '../../review/reviewers';

/**
 * Reviewers' routes, each behind the reviewer's own credential (`Authorization: Bearer rvw_…`,
 * made by `npm run reviewer -- add`). The verdict is recorded under the reviewer the credential
 * names, never under a name from the body; ADMIN_TOKEN is an operator's and approves nothing.
 *
 * GET  /admin/review/:inbox_id/:message_id        what awaits a verdict: status, revision, reason, the draft's text
 * POST /admin/review {"inbox_id", "message_id", "verdict": "approve"|"reject", "revision", "text"?}
 *      200 {accepted, revision}; 409 when no verdict is awaited, the revision is stale, or a verdict stands
 * GET  /admin/review/:inbox_id/:message_id/audit  who judged it, which revision, when (a reviewer or ADMIN_TOKEN)
 *
 * With REVIEW_PROXY_USER_HEADER set, a request without a bearer token is the person a trusted
 * authenticating proxy names in that header — only when it also carries the proxy's shared secret
 * (REVIEW_PROXY_SECRET, in x-replyonce-proxy-secret). This port is the webhook's, which AgentMail
 * must reach from the internet: a header anyone can set names nobody without the secret that only
 * the proxy adds (off by default; see docs/review-desk.md and docs/deployment.md).
 */

/** The header the authenticating proxy adds REVIEW_PROXY_SECRET in (and strips from what clients send). */
export const REVIEW_PROXY_SECRET_HEADER = 'x-replyonce-proxy-secret';

export interface ReviewRouteOptions {
  db: Db;
  temporal: Client;
  /** ADMIN_TOKEN, when set: it may read the audit, never give a verdict. */
  adminToken?: string | undefined;
  /**
   * REVIEW_PROXY_USER_HEADER: a trusted authenticating proxy (OIDC in front) names the person in
   * this header; they review every inbox, recorded as `proxy:<value>`. Undefined: tokens only.
   */
  proxyUserHeader?: string | undefined;
  /** REVIEW_PROXY_SECRET: a request names its reviewer in proxyUserHeader only when it carries this too. */
  proxySecret?: string | undefined;
}

const reviewBody = z
  .object({
    inbox_id: z.string().min(1),
    message_id: z.string().min(1),
    verdict: z.enum(['approve', 'reject']),
    /** The revision the reviewer saw (GET …/:message_id, or the desk): a stale one is refused. */
    revision: z.number().int().min(1),
    /** The edited reply: the one rule for a reply's text (contract/draft-text.ts), as the workflow's Update applies it. */
    text: z
      .string()
      .superRefine((text, ctx) => {
        const problem = draftProblem(text);
        if (problem !== null) ctx.addIssue({ code: 'custom', message: `the text ${problem}` });
      })
      .optional(),
    reviewer: z
      .never({ error: 'the reviewer is the owner of the bearer token; a name in the body is not accepted' })
      .optional(),
  })
  .strict();

const messageParams = z.object({ inbox_id: z.string().min(1), message_id: z.string().min(1) });

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();
const bearer = (request: FastifyRequest): string => {
  const header = request.headers.authorization ?? '';
  return header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
};

export const reviewRoutes: FastifyPluginAsync<ReviewRouteOptions> = async (app: FastifyInstance, options) => {
  const admin = options.adminToken === undefined ? null : digest(options.adminToken);
  const isAdmin = (token: string) => admin !== null && token !== '' && timingSafeEqual(digest(token), admin);

  const proxySecret = options.proxySecret === undefined ? null : digest(options.proxySecret);
  /** Whether the request came through the proxy: it carries the secret only the proxy adds. */
  const fromProxy = (request: FastifyRequest): boolean => {
    const value = request.headers[REVIEW_PROXY_SECRET_HEADER];
    const sent = (Array.isArray(value) ? value[0] : value) ?? '';
    return proxySecret !== null && sent !== '' && timingSafeEqual(digest(sent), proxySecret);
  };

  /** The person a trusted proxy names, as a reviewer of every inbox; null when off, absent or not from the proxy. */
  function proxyReviewer(request: FastifyRequest): Reviewer | null {
    if (options.proxyUserHeader === undefined || !fromProxy(request)) return null;
    const value = request.headers[options.proxyUserHeader];
    const user = (Array.isArray(value) ? value[0] : value)?.trim().toLowerCase() ?? '';
    if (user === '' || user.length > 190) return null;
    return { id: `proxy:${user}`, name: user, inboxes: null, createdAt: new Date(0), revokedAt: null };
  }

  /** The reviewer of this request, or the reply already sent (401/403). */
  async function reviewerOf(request: FastifyRequest, reply: FastifyReply, inboxId: string): Promise<Reviewer | null> {
    const token = bearer(request);
    const reviewer = token === '' ? proxyReviewer(request) : await authenticateReviewer(options.db, token);
    if (reviewer === null) {
      const message = isAdmin(token)
        ? 'ADMIN_TOKEN is for operator routes; a verdict needs a reviewer token (npm run reviewer -- add).'
        : 'A valid Authorization: Bearer <reviewer token> header is required (npm run reviewer -- add).';
      request.log.warn({ url: request.url }, 'review request refused: no valid reviewer token');
      await reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized', message });
      return null;
    }
    if (!mayReview(reviewer, inboxId)) {
      await reply
        .code(403)
        .send({ error: 'forbidden', message: `reviewer ${reviewer.id} may not review mail of that inbox` });
      return null;
    }
    return reviewer;
  }

  app.get('/admin/review/:inbox_id/:message_id', async (request, reply) => {
    const params = messageParams.parse(request.params);
    if ((await reviewerOf(request, reply, params.inbox_id)) === null) return reply;
    const state = await reviewState(options, params).catch(notFound);
    if (state === null) return reply.code(404).send({ error: 'not_found', message: 'No workflow for that message.' });
    const draft = state.draftKey === null ? undefined : await storedText(options.db, state.draftKey);
    return reply.send({ ...state, text: draft ?? null });
  });

  app.post('/admin/review', async (request, reply) => {
    const body = reviewBody.safeParse(request.body);
    if (!body.success)
      return reply.code(400).send({
        error: 'bad_request',
        message: body.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
      });
    const reviewer = await reviewerOf(request, reply, body.data.inbox_id);
    if (reviewer === null) return reply;
    const ref = { inboxId: body.data.inbox_id, messageId: body.data.message_id };
    const review: ReviewInput = {
      verdict: body.data.verdict,
      revision: body.data.revision,
      reviewer: reviewer.id,
      ...(body.data.text ? { text: body.data.text } : {}),
    };
    try {
      const answer = await options.temporal.workflow
        .getHandle(inboundWorkflowId(ref))
        .executeUpdate(reviewUpdate, { args: [review] });
      request.log.info(
        { reviewer: reviewer.id, verdict: review.verdict, revision: review.revision },
        'verdict accepted',
      );
      return reply.send(answer);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        // Finished (or never started): a finished run still answers what became of it.
        const state = await reviewState(options, body.data).catch(notFound);
        if (state === null)
          return reply.code(404).send({ error: 'not_found', message: 'No workflow for that message.' });
        return reply.code(409).send({
          error: 'review_refused',
          message: state.verdict
            ? `a verdict stands: ${state.verdict.verdict} of revision ${state.verdict.revision} by ${state.verdict.reviewer} (ReplyStatus=${state.status})`
            : `no verdict is awaited: ReplyStatus=${state.status}`,
          state,
        });
      }
      if (error instanceof WorkflowUpdateFailedError && error.cause instanceof ApplicationFailure) {
        const refused = error.cause.type === FailureType.ReviewRefused;
        return reply
          .code(refused ? 409 : 422)
          .send({ error: refused ? 'review_refused' : 'invalid_review', message: error.cause.message });
      }
      throw error;
    }
  });

  app.get('/admin/review/:inbox_id/:message_id/audit', async (request, reply) => {
    const params = messageParams.parse(request.params);
    if (!isAdmin(bearer(request)) && (await reviewerOf(request, reply, params.inbox_id)) === null) return reply;
    const workflowId = inboundWorkflowId({ inboxId: params.inbox_id, messageId: params.message_id });
    return reply.send({ workflowId, audit: await listReviewAudit(options.db, { workflowId }) });
  });
};

function reviewState(
  options: ReviewRouteOptions,
  body: { inbox_id: string; message_id: string },
): Promise<ReviewState> {
  return options.temporal.workflow
    .getHandle(inboundWorkflowId({ inboxId: body.inbox_id, messageId: body.message_id }))
    .query(reviewStateQuery);
}

function notFound(error: unknown): null {
  if (error instanceof WorkflowNotFoundError) return null;
  throw error;
}

/** The text under a draft key, as the operation store holds it (the one copy the reply is sent from). */
async function storedText(db: Db, draftKey: string): Promise<string | undefined> {
  return (await new OperationStore(db).completed<StoredDraft>(draftKey, OperationKind.draft))?.text;
}

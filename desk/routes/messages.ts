import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { previewForm, type PreviewForm, reviewForm, type ReviewForm, verdictOf, type Verdict } from '../forms';
import { frame, htmlReply } from '../respond';
import type { ReviewClient } from '../review-client';
import type { SignedIn } from '../sessions';
import { messagePage, type MessageView, previewPage, problemPage } from '../views';

export interface MessageRouteOptions {
  client: ReviewClient;
  deadlineMs: number;
}

/** What the page after a verdict says first (`?done=`); what stands is shown below it, from the workflow. */
const NOTICES: Record<string, string> = {
  approve: 'Approved: the reply is on its way.',
  edit: 'Approved with your edit: the edited reply is on its way.',
  reject: 'Rejected: nothing will be sent.',
};

type Params = { id: string };

/** A message's page, the diff of an edit, and the verdict. */
export async function messageRoutes(app: FastifyInstance, options: MessageRouteOptions): Promise<void> {
  const { client } = options;

  const showMessage = async (
    request: FastifyRequest<{ Params: Params }>,
    reply: FastifyReply,
    code: number,
    extra: Pick<MessageView, 'notice' | 'editing'>,
  ) =>
    htmlReply(
      reply,
      code,
      messagePage(frame(request, reply), await client.view(request.reviewer as SignedIn, request.params.id, extra)),
    );

  app.get<{ Params: Params; Querystring: { done?: string } }>('/messages/:id', async (request, reply) => {
    const done = request.query.done;
    const notice = done && NOTICES[done] ? { kind: 'ok' as const, text: NOTICES[done] } : null;
    return showMessage(request, reply, 200, { notice, editing: null });
  });

  /** The message, its state and the draft awaiting a verdict (when the form's revision is the one awaiting it). */
  async function judged(request: FastifyRequest<{ Params: Params }>, form: PreviewForm | ReviewForm) {
    const message = await client.messageOf(request.reviewer as SignedIn, request.params.id);
    const state = await client.state(message);
    const draft = state.revision === form.revision ? await client.awaitingDraft(state) : null;
    return { message, state, drafted: draft?.text ?? null };
  }

  /** The answers every verdict route shares: the diff, a refusal, nothing awaited. Null: the caller decides. */
  async function answer(
    request: FastifyRequest<{ Params: Params }>,
    reply: FastifyReply,
    verdict: Verdict,
    context: Awaited<ReturnType<typeof judged>>,
    editedUnseen: boolean,
  ) {
    switch (verdict.kind) {
      case 'not-awaited':
        return showMessage(request, reply, 409, {
          notice: {
            kind: 'error',
            text: `Your verdict was not applied: no draft awaits a verdict on the revision you saw (status: ${context.state.status.replace(/_/g, ' ')}). What stands is shown below.`,
          },
          editing: null,
        });
      case 'refuse':
        return showMessage(request, reply, 422, {
          notice: { kind: 'error', text: `The edited reply cannot be sent: ${verdict.reason}. Nothing was sent.` },
          editing: verdict.text,
        });
      case 'show-diff':
        return htmlReply(
          reply,
          200,
          previewPage(frame(request, reply), {
            workflowId: request.params.id,
            inboxId: context.message.inboxId,
            revision: verdict.revision,
            before: context.drafted ?? '',
            after: verdict.text,
            notice: editedUnseen
              ? 'You edited the reply, so nothing was sent yet: your changes are below. Approve the edited reply, or go back to the message.'
              : null,
          }),
        );
      default:
        return null;
    }
  }

  // An attachment's link (the page's and the ticket's): AgentMail's signed copy, for a reviewer of the inbox only.
  app.get<{ Params: Params & { attachmentId: string } }>(
    '/messages/:id/attachments/:attachmentId',
    async (request, reply) => {
      const url = await client.attachmentUrl(
        request.reviewer as SignedIn,
        request.params.id,
        request.params.attachmentId,
      );
      return reply.header('cache-control', 'no-store').redirect(url, 302);
    },
  );

  app.post<{ Params: Params; Body: PreviewForm }>(
    '/messages/:id/preview',
    { schema: { body: previewForm }, preHandler: app.csrfCheck },
    async (request, reply) => {
      const context = await judged(request, request.body);
      const verdict = verdictOf({ ...request.body, verdict: 'preview' }, context.drafted);
      return (await answer(request, reply, verdict, context, false)) ?? reply;
    },
  );

  app.post<{ Params: Params; Body: ReviewForm }>(
    '/messages/:id/review',
    { schema: { body: reviewForm }, preHandler: app.csrfCheck },
    async (request, reply) => {
      const reviewer = request.reviewer as SignedIn;
      const workflowId = request.params.id;
      const context = await judged(request, request.body);
      const verdict = verdictOf(request.body, context.drafted);
      const answered = await answer(request, reply, verdict, context, true);
      if (answered !== null) return answered;
      if (verdict.kind !== 'approve' && verdict.kind !== 'approve-edit' && verdict.kind !== 'reject') return reply;

      // The reviewer is the signed-in one, from the session: never a field of the form.
      const submitted = await client.submit(context.message, {
        verdict: verdict.kind === 'reject' ? 'reject' : 'approve',
        revision: verdict.revision,
        reviewer: reviewer.id,
        ...(verdict.kind === 'approve-edit' ? { text: verdict.text } : {}),
      });
      const edited = verdict.kind === 'approve-edit';
      switch (submitted.kind) {
        case 'accepted': {
          request.log.info(
            { workflowId, reviewer: reviewer.id, verdict: verdict.kind, revision: verdict.revision, edited },
            'desk verdict accepted',
          );
          const done = verdict.kind === 'reject' ? 'reject' : edited ? 'edit' : 'approve';
          return reply.code(303).redirect(`/messages/${encodeURIComponent(workflowId)}?done=${done}`);
        }
        case 'refused':
          request.log.info({ workflowId, reviewer: reviewer.id, refused: submitted.reason }, 'desk verdict refused');
          return showMessage(request, reply, submitted.stale ? 409 : 422, {
            notice: {
              kind: 'error',
              text: submitted.stale
                ? `Your verdict was not applied: the reply changed while you looked (${submitted.reason}). What stands is shown below.`
                : `Your verdict was not applied: ${submitted.reason}.`,
            },
            editing: submitted.stale ? null : edited ? verdict.text : null,
          });
        case 'decided':
          return showMessage(request, reply, 409, {
            notice: {
              kind: 'error',
              text: 'Your verdict was not applied: this message has been decided already. What stands is shown below.',
            },
            editing: null,
          });
        case 'unconfirmed': {
          request.log.warn({ workflowId, reviewer: reviewer.id }, 'desk verdict not confirmed within the deadline');
          const text = `Your verdict is not confirmed yet: Temporal did not answer within ${Math.round(options.deadlineMs / 1000)} s, and it may still apply it. Reload this page to see the verdict that stands; do not decide again before it shows.`;
          try {
            return await showMessage(request, reply, 202, { notice: { kind: 'pending', text }, editing: null });
          } catch {
            return htmlReply(reply, 503, problemPage(frame(request, reply), 'Not confirmed yet', text));
          }
        }
      }
    },
  );
}

import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors';
import { listResponse, pageOf } from '../paging';
import { createDraftSchema, parseBody, present, updateDraftSchema, updateLabelsSchema } from '../schemas';
import { idempotentSend } from '../sending';
import type { SandboxState } from '../state';

type InboxParams = { Params: { inbox_id: string } };
type DraftParams = { Params: { inbox_id: string; draft_id: string } };

export function draftRoutes(app: FastifyInstance, state: SandboxState): void {
  const { mailbox, drafts } = state;

  /** client_id makes creation idempotent: a repeat returns the existing draft, 200 either way. */
  app.post<InboxParams>('/v0/inboxes/:inbox_id/drafts', async (request) => {
    const body = parseBody(createDraftSchema, request.body);
    const { inbox_id } = request.params;
    mailbox.inbox(inbox_id);
    const parent = body.in_reply_to ? safeMessage(state, inbox_id, body.in_reply_to) : undefined;
    const { draft } = drafts.create(inbox_id, {
      client_id: present(body.client_id),
      labels: present(body.labels),
      reply_to: present(body.reply_to),
      to: present(body.to),
      cc: present(body.cc),
      bcc: present(body.bcc),
      subject: present(body.subject),
      text: present(body.text),
      html: present(body.html),
      in_reply_to: present(body.in_reply_to),
      references: parent ? [...(parent.references ?? []), parent.message_id] : undefined,
      send_at: present(body.send_at),
    });
    return draft;
  });

  app.get<InboxParams & { Querystring: { limit?: string; page_token?: string | string[] } }>(
    '/v0/inboxes/:inbox_id/drafts',
    async (request) => {
      mailbox.inbox(request.params.inbox_id);
      const page = pageOf(drafts.listOf(request.params.inbox_id), request.query, false);
      // DraftItem: a Draft without bodies, reply_to, client_id, references and created_at.
      const items = page.items.map(
        ({ text: _t, html: _h, reply_to: _r, client_id: _c, references: _refs, created_at: _ca, ...item }) => item,
      );
      return listResponse('drafts', { ...page, items });
    },
  );

  app.get<DraftParams>('/v0/inboxes/:inbox_id/drafts/:draft_id', async (request) =>
    drafts.get(request.params.inbox_id, request.params.draft_id),
  );

  /** AgentMail's PATCH: only the fields given change. */
  app.patch<DraftParams>('/v0/inboxes/:inbox_id/drafts/:draft_id', async (request) => {
    const body = parseBody(updateDraftSchema, request.body);
    const { inbox_id, draft_id } = request.params;
    return drafts.update(inbox_id, draft_id, {
      to: present(body.to),
      cc: present(body.cc),
      bcc: present(body.bcc),
      reply_to: present(body.reply_to),
      subject: present(body.subject),
      text: present(body.text),
      html: present(body.html),
    });
  });

  /** 404 for a draft that is not there (never was, sent, or deleted before). */
  app.delete<DraftParams>('/v0/inboxes/:inbox_id/drafts/:draft_id', async (request, reply) => {
    const { inbox_id, draft_id } = request.params;
    mailbox.inbox(inbox_id);
    if (!drafts.delete(inbox_id, draft_id)) throw ApiError.notFound('Draft');
    return reply.code(204).send();
  });

  /** Sends and deletes the draft; the body (UpdateMessageRequest) adjusts the sent message's labels. */
  app.post<DraftParams>('/v0/inboxes/:inbox_id/drafts/:draft_id/send', async (request, reply) => {
    const body = parseBody(updateLabelsSchema, request.body);
    const { inbox_id, draft_id } = request.params;
    return idempotentSend(state, request, reply, (key, endpoint) => {
      const draft = drafts.get(inbox_id, draft_id);
      if (!draft.to?.length && !draft.cc?.length && !draft.bcc?.length)
        throw ApiError.validation('the draft has no recipients');
      const parent = draft.in_reply_to ? safeMessage(state, inbox_id, draft.in_reply_to) : undefined;
      const remove = body.remove_labels ?? [];
      const sent = mailbox.addMessage({
        inbox_id,
        thread_id: parent?.thread_id,
        from: inbox_id,
        to: draft.to ?? [],
        cc: draft.cc,
        bcc: draft.bcc,
        reply_to: draft.reply_to,
        subject: draft.subject,
        text: draft.text,
        html: draft.html,
        in_reply_to: draft.in_reply_to,
        references: draft.references,
        labels: ['sent', ...draft.labels, ...(body.add_labels ?? [])].filter((l) => !remove.includes(l)),
      });
      drafts.delete(inbox_id, draft_id);
      mailbox.recordSent(sent, endpoint, key);
      return { message_id: sent.message_id, thread_id: sent.thread_id };
    });
  });
}

function safeMessage(state: SandboxState, inboxId: string, messageId: string) {
  try {
    return state.mailbox.message(inboxId, messageId);
  } catch {
    return undefined;
  }
}

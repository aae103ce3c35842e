import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors';
import { toMessageItem } from '../views';
import { listResponse, pageByTime } from '../paging';
import { parseBody, present, replySchema, sendSchema, updateLabelsSchema } from '../schemas';
import { bareAddress, idempotentSend, replySubject } from '../sending';
import type { SandboxState } from '../state';
import type { MessageRaw } from '../wire';
import { listFilter, type ListQuery } from './list-query';

type InboxParams = { Params: { inbox_id: string } };
type MessageParams = { Params: { inbox_id: string; message_id: string } };

/** Path parameters arrive percent-decoded (Fastify decodes them): ids are used as given. */
export function messageRoutes(app: FastifyInstance, state: SandboxState): void {
  const { mailbox } = state;

  app.get<InboxParams & { Querystring: ListQuery }>('/v0/inboxes/:inbox_id/messages', async (request) => {
    const { filter, ascending } = listFilter(request.query);
    const matching = mailbox.messagesOf(request.params.inbox_id).filter((m) => filter(m.value));
    const page = pageByTime(matching, request.query, ascending);
    return listResponse('messages', { ...page, items: page.items.map(toMessageItem) });
  });

  app.get<MessageParams>('/v0/inboxes/:inbox_id/messages/:message_id', async (request) => {
    return mailbox.message(request.params.inbox_id, request.params.message_id);
  });

  /** The attachment's metadata and a signed download URL (AttachmentResponse). */
  app.get<{ Params: MessageParams['Params'] & { attachment_id: string } }>(
    '/v0/inboxes/:inbox_id/messages/:message_id/attachments/:attachment_id',
    async (request) => {
      const message = mailbox.message(request.params.inbox_id, request.params.message_id);
      const origin = `${request.protocol}://${request.host}`;
      return state.attachments.signed(message.attachments, request.params.attachment_id, origin);
    },
  );

  /** The signed URL itself: no API key (a CDN link), 403 once expired as a CDN answers. */
  app.get<{ Params: { token: string } }>('/_sandbox/downloads/:token', async (request, reply) => {
    const found = state.attachments.download(request.params.token);
    if (!found)
      return reply.code(403).type('text/plain').send('AccessDenied: the signed URL has expired or is unknown');
    return reply.type(found.contentType).send(found.bytes);
  });

  // Permanently deletes a message (the SDK's messages.delete); 404 when there is none.
  app.delete<MessageParams>('/v0/inboxes/:inbox_id/messages/:message_id', async (request, reply) => {
    mailbox.deleteMessage(request.params.inbox_id, request.params.message_id);
    return reply.code(204).send();
  });

  app.patch<MessageParams>('/v0/inboxes/:inbox_id/messages/:message_id', async (request) => {
    const body = parseBody(updateLabelsSchema, request.body);
    const message = mailbox.updateLabels(
      request.params.inbox_id,
      request.params.message_id,
      body.add_labels ?? [],
      body.remove_labels ?? [],
    );
    return { message_id: message.message_id, labels: message.labels };
  });

  app.post<MessageParams>('/v0/inboxes/:inbox_id/messages/:message_id/reply', async (request, reply) => {
    const body = parseBody(replySchema, request.body);
    const { inbox_id, message_id } = request.params;
    return idempotentSend(state, request, reply, (key, endpoint) => {
      const original = mailbox.message(inbox_id, message_id);
      const to = present(body.to) ?? original.reply_to ?? [original.from];
      const cc = body.reply_all ? replyAllCc(original, inbox_id, to, present(body.cc)) : present(body.cc);
      const sent = mailbox.addMessage({
        inbox_id,
        thread_id: original.thread_id,
        from: inbox_id,
        to,
        cc,
        bcc: present(body.bcc),
        reply_to: present(body.reply_to),
        subject: replySubject(original.subject),
        text: present(body.text),
        html: present(body.html),
        in_reply_to: original.message_id,
        references: [...(original.references ?? []), original.message_id],
        headers: present(body.headers),
        labels: ['sent', ...(body.labels ?? [])],
      });
      mailbox.recordSent(sent, endpoint, key);
      return { message_id: sent.message_id, thread_id: sent.thread_id };
    });
  });

  app.post<InboxParams>('/v0/inboxes/:inbox_id/messages/send', async (request, reply) => {
    const body = parseBody(sendSchema, request.body);
    const { inbox_id } = request.params;
    if (!body.to?.length && !body.cc?.length && !body.bcc?.length)
      throw ApiError.validation('at least one recipient (to, cc or bcc) is required');
    return idempotentSend(state, request, reply, (key, endpoint) => {
      const sent = mailbox.addMessage({
        inbox_id,
        from: inbox_id,
        to: body.to ?? [],
        cc: present(body.cc),
        bcc: present(body.bcc),
        reply_to: present(body.reply_to),
        subject: present(body.subject),
        text: present(body.text),
        html: present(body.html),
        headers: present(body.headers),
        labels: ['sent', ...(body.labels ?? [])],
      });
      mailbox.recordSent(sent, endpoint, key);
      return { message_id: sent.message_id, thread_id: sent.thread_id };
    });
  });
}

/** Everyone on the original except us and those already in To. */
function replyAllCc(original: MessageRaw, inboxId: string, to: string[], cc: string[] | undefined): string[] {
  const skip = new Set([inboxId, ...to].map(bareAddress));
  const all = [...(cc ?? []), ...original.to, ...(original.cc ?? [])];
  return all.filter(
    (a, i) => !skip.has(bareAddress(a)) && all.findIndex((b) => bareAddress(b) === bareAddress(a)) === i,
  );
}

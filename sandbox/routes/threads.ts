import type { FastifyInstance } from 'fastify';
import { summarizeThread } from '../views';
import { staleHides } from '../faults';
import { listResponse, pageOf } from '../paging';
import type { SandboxState } from '../state';
import { listFilter, type ListQuery } from './list-query';

type PageQuery = { limit?: string; page_token?: string | string[] };
type ThreadParams = { Params: { inbox_id: string; thread_id: string } };

export function threadRoutes(app: FastifyInstance, state: SandboxState): void {
  const { mailbox } = state;

  app.get<{ Params: { inbox_id: string }; Querystring: ListQuery }>(
    '/v0/inboxes/:inbox_id/threads',
    async (request) => {
      const { filter, ascending } = listFilter({
        ...request.query,
        from: request.query.senders,
        to: request.query.recipients,
      });
      const matching = mailbox
        .threadsOf(request.params.inbox_id)
        .filter((t) => filter({ ...t.value, from: t.value.senders.join(' '), to: t.value.recipients }));
      const page = pageOf(matching, request.query, ascending);
      return listResponse('threads', page);
    },
  );

  // Permanently deletes a thread and all of its messages (the SDK's threads.delete); 404 when there is none.
  app.delete<ThreadParams>('/v0/inboxes/:inbox_id/threads/:thread_id', async (request, reply) => {
    mailbox.deleteThread(request.params.inbox_id, request.params.thread_id);
    return reply.code(204).send();
  });

  /**
   * The thread with one page of messages. The SDK documents page_token as "the next, older
   * page": pages walk back from the newest message; inside a page messages run oldest first.
   */
  app.get<ThreadParams & { Querystring: PageQuery }>('/v0/inboxes/:inbox_id/threads/:thread_id', async (request) => {
    const stale = state.faults.drawn(request.raw);
    const all = mailbox
      .threadMessages(request.params.inbox_id, request.params.thread_id)
      .filter((m) => !staleHides(stale, m.value, state.clock.nowMs()));
    const page = pageOf(all, request.query, false);
    return {
      ...summarizeThread(all.map((m) => m.value)),
      count: page.count,
      limit: page.limit,
      ...(page.next_page_token ? { next_page_token: page.next_page_token } : {}),
      messages: page.items.reverse(),
    };
  });
}

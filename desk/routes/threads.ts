import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { handBackThread } from '../../activities/turns/person-answering';
import { INBOUND_MESSAGE_WORKFLOW, SearchAttributes } from '../../contract';
import type { Db } from '../../lib/db';
import { html } from '../html';
import { frame, htmlReply } from '../respond';
import { mayReview, type SignedIn } from '../sessions';
import { listTable, page } from '../views';
import { literal } from '../waiting';

/**
 * Threads a person of the team answers (docs/conversations.md, "A person takes over"): the agent
 * left a customer's message to them (SkipReason=person-answering) and has not been handed the
 * thread back since. Read from Temporal's visibility (ids only) and `thread_handbacks`; the one
 * action is "let the agent answer this thread again", recorded with the signed-in reviewer's id.
 */

export interface ThreadsOptions {
  db: Db;
  temporal: Client;
  deadlineMs: number;
}

export interface HeldThread {
  inboxId: string;
  threadId: string;
  /** When the agent last left one of its messages to a person. */
  lastLeftAt: Date;
  messages: number;
}

/** The most runs one page reads; a busy inbox's older threads wait for the next hand-back. */
const RUNS_READ = 1_000;

const handBackForm = z.object({
  _csrf: z.string().optional(),
  inbox: z.string().trim().min(1, 'the form names no inbox').max(320),
  thread: z.string().trim().min(1, 'the form names no thread').max(320),
});

export function personAnsweringQuery(inboxes: readonly string[] | null): string {
  const rights = inboxes === null ? '' : ` AND InboxId IN (${inboxes.map(literal).join(', ') || '""'})`;
  return `WorkflowType = ${literal(INBOUND_MESSAGE_WORKFLOW)} AND SkipReason = "person-answering"${rights}`;
}

export async function heldThreads(db: Db, temporal: Client, reviewer: SignedIn): Promise<HeldThread[]> {
  const threads = new Map<string, HeldThread>();
  let read = 0;
  for await (const info of temporal.workflow.list({ query: personAnsweringQuery(reviewer.inboxes), pageSize: 200 })) {
    if (++read > RUNS_READ) break;
    const inboxId = info.typedSearchAttributes.get(SearchAttributes.InboxId);
    const threadId = info.typedSearchAttributes.get(SearchAttributes.ThreadId);
    if (inboxId === undefined || threadId === undefined || !mayReview(reviewer, inboxId)) continue;
    const at = info.closeTime ?? info.startTime;
    const key = JSON.stringify([inboxId, threadId]);
    const known = threads.get(key);
    if (known) {
      known.messages += 1;
      if (at > known.lastLeftAt) known.lastLeftAt = at;
    } else threads.set(key, { inboxId, threadId, lastLeftAt: at, messages: 1 });
  }
  if (threads.size === 0) return [];
  // A thread handed back after the agent last left a message of it is the agent's again.
  const listed = [...threads.values()];
  const { rows } = await db.query<{ inbox_id: string; thread_id: string; handed_back_at: Date }>(
    `SELECT inbox_id, thread_id, max(handed_back_at) AS handed_back_at FROM thread_handbacks
      WHERE (inbox_id, thread_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
      GROUP BY inbox_id, thread_id`,
    [listed.map((t) => t.inboxId), listed.map((t) => t.threadId)],
  );
  const handedBack = new Map(rows.map((r) => [JSON.stringify([r.inbox_id, r.thread_id]), r.handed_back_at]));
  return listed
    .filter((t) => {
      const back = handedBack.get(JSON.stringify([t.inboxId, t.threadId]));
      return back === undefined || back < t.lastLeftAt;
    })
    .sort((a, b) => b.lastLeftAt.getTime() - a.lastLeftAt.getTime());
}

export async function threadRoutes(app: FastifyInstance, options: ThreadsOptions): Promise<void> {
  app.get<{ Querystring: { done?: string } }>('/threads', async (request, reply) => {
    const reviewer = request.reviewer as SignedIn;
    const threads = await options.temporal.connection.withDeadline(Date.now() + options.deadlineMs, () =>
      heldThreads(options.db, options.temporal, reviewer),
    );
    const done = request.query.done === 'handed-back';
    return htmlReply(reply, 200, threadsPage(request, reply, threads, done));
  });

  app.post<{ Body: z.output<typeof handBackForm> }>(
    '/threads/hand-back',
    { schema: { body: handBackForm }, preHandler: app.csrfCheck },
    async (request, reply) => {
      const reviewer = request.reviewer as SignedIn;
      const { inbox, thread } = request.body;
      if (!mayReview(reviewer, inbox))
        return htmlReply(reply, 403, threadsPage(request, reply, [], false, 'You may not review that inbox.'));
      await handBackThread(options.db, { inboxId: inbox, threadId: thread, by: reviewer.id });
      request.log.info(
        { inboxId: inbox, threadId: thread, reviewer: reviewer.id },
        'desk: thread handed back to the agent',
      );
      return reply.code(303).redirect('/threads?done=handed-back');
    },
  );

  function threadsPage(
    request: Parameters<typeof frame>[0],
    reply: Parameters<typeof frame>[1],
    threads: HeldThread[],
    done: boolean,
    problem?: string,
  ): string {
    const pageFrame = frame(request, reply);
    const rows = threads.map(
      (t) =>
        html`<tr>
          <td>${t.inboxId}</td>
          <td><code>${t.threadId}</code></td>
          <td>
            <time datetime="${t.lastLeftAt.toISOString()}"
              >${t.lastLeftAt.toISOString().slice(0, 16).replace('T', ' ')} UTC</time
            >
          </td>
          <td>${t.messages}</td>
          <td>
            <form method="post" action="/threads/hand-back" class="inline">
              <input type="hidden" name="_csrf" value="${pageFrame.csrf}" />
              <input type="hidden" name="inbox" value="${t.inboxId}" />
              <input type="hidden" name="thread" value="${t.threadId}" />
              <button type="submit">Let the agent answer this thread again</button>
            </form>
          </td>
        </tr>`,
    );
    return page(
      'Threads a person answers',
      pageFrame,
      html`<h1>Threads a person answers</h1>
        <p>
          Someone of the team wrote in these threads (not the agent), so the agent leaves the customer's later messages
          to a person. Hand a thread back when the agent may answer it again. <a href="/">Back to the queue</a>
        </p>
        ${done ? html`<p class="notice ok" role="status">Handed back: the agent answers the customer's next message.</p>` : ''}
        ${problem ? html`<p class="notice error" role="alert">${problem}</p>` : ''}
        ${listTable({
          rows,
          empty: 'No thread is held by a person.',
          columns: ['Inbox', 'Thread', 'Last left to a person', 'Messages left', 'Action'],
        })}`,
    );
  }
}

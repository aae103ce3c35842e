import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AgentMailClient } from '../../lib/agentmail';
import { describeRows, filterRows, QUEUE_SORTS, type QueueSort, sortRows } from '../queue-details';
import { frame, htmlReply } from '../respond';
import type { SignedIn } from '../sessions';
import { queuePage } from '../views';
import { waitingMessages } from '../waiting';

export interface QueueOptions {
  temporal: Client;
  agentmail: AgentMailClient;
  deadlineMs: number;
}

const optionalText = z
  .string()
  .max(320)
  .optional()
  .transform((value) => value?.trim() || null);

const queueQuery = z.object({
  inbox: optionalText,
  /** Words of the subject or the customer's address. */
  q: optionalText,
  sort: z.enum(Object.keys(QUEUE_SORTS) as [QueueSort, ...QueueSort[]]).default('waiting'),
});

/** The queue: what waits for a person, told apart by subject, customer, time and conversation; sorted and filtered. */
export async function queueRoutes(app: FastifyInstance, options: QueueOptions): Promise<void> {
  app.get<{ Querystring: z.output<typeof queueQuery> }>(
    '/',
    { schema: { querystring: queueQuery } },
    async (request, reply) => {
      const reviewer = request.reviewer as SignedIn;
      const { inbox, q, sort } = request.query;
      const all = await options.temporal.connection.withDeadline(Date.now() + options.deadlineMs, () =>
        waitingMessages(options.temporal, reviewer),
      );
      const inboxes = [...new Set([...(reviewer.inboxes ?? []), ...all.messages.map((m) => m.inboxId)])].sort();
      const inInbox = inbox === null ? all.messages : all.messages.filter((m) => m.inboxId === inbox);
      const rows = sortRows(filterRows(await describeRows(options.agentmail, inInbox), q), sort);
      return htmlReply(
        reply,
        200,
        queuePage(frame(request, reply), { messages: rows, more: all.more, inboxes, inbox, q, sort, now: new Date() }),
      );
    },
  );
}

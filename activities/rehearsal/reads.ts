import { createHash } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { AgentMail, type AgentMailClient } from 'agentmail';
import { FailureType } from '../../contract';
import { providerFailure } from '../agentmail/failures';
import type { InboxLister } from '../decide/own-addresses';
import type { AttachmentSource } from '../draft/attachment-reader';

/**
 * What a rehearsal may ask of AgentMail: reads, and nothing else. The rehearsal's activities are
 * handed this object, never the client, so no code of theirs can send, draft, label or delete —
 * a diverted effect is one that cannot be reached, not one that is skipped (docs/rehearsal.md).
 */
export interface MailReader extends InboxLister {
  listMessages(
    inboxId: string,
    page: { after: Date; before: Date; pageToken?: string },
  ): Promise<AgentMail.ListMessagesResponse>;
  message(inboxId: string, messageId: string): Promise<AgentMail.Message>;
  thread(inboxId: string, threadId: string): Promise<AgentMail.Thread>;
  /** The one attachment read the live draft makes (its signed download link), nothing that writes. */
  attachments: AttachmentSource;
}

/** The read-only view of a client: closures over its read methods, the client itself out of reach. */
export function readOnly(client: AgentMailClient): MailReader {
  return Object.freeze({
    inboxes: Object.freeze({
      list: (request?: Parameters<AgentMailClient['inboxes']['list']>[0]) => client.inboxes.list(request),
    }),
    listMessages: (inboxId: string, page: { after: Date; before: Date; pageToken?: string }) =>
      client.inboxes.messages.list(inboxId, {
        after: page.after,
        before: page.before,
        ascending: true,
        limit: PAGE_SIZE,
        ...(page.pageToken ? { pageToken: page.pageToken } : {}),
      }),
    message: (inboxId: string, messageId: string) => client.inboxes.messages.get(inboxId, messageId),
    thread: (inboxId: string, threadId: string) => client.inboxes.threads.get(inboxId, threadId),
    attachments: Object.freeze({
      inboxes: Object.freeze({
        messages: Object.freeze({
          getAttachment: (...args: Parameters<AgentMailClient['inboxes']['messages']['getAttachment']>) =>
            client.inboxes.messages.getAttachment(...args),
        }),
      }),
    }),
  });
}

/** AgentMail's largest page of a listing. */
const PAGE_SIZE = 100;
/** The most messages a period is listed to (a sample of 50,000 messages' period lists them all, no more). */
export const MAX_LISTED = 100_000;

export interface ListedMessage {
  messageId: string;
  threadId: string;
  receivedAt: Date;
}

/**
 * The inbound messages of a period, oldest first: the first `limit` of them, or (sample) a uniform
 * sample of `limit` out of all of them — the ones whose hash with the rehearsal id is smallest, so
 * the same rehearsal picks the same messages every time it lists. Our own mail (labelled `sent`)
 * is not rehearsed: it is what the team did, read beside each message from its thread.
 */
export async function listPeriod(
  reader: MailReader,
  input: { rehearsalId: string; inboxId: string; from: Date; to: Date; limit: number; sample: boolean },
): Promise<{ chosen: ListedMessage[]; seen: number; truncated: boolean }> {
  const inbound: ListedMessage[] = [];
  let seen = 0;
  let pageToken: string | undefined;
  // `after` is exclusive at AgentMail: a millisecond earlier keeps a message sent at `from` itself.
  const after = new Date(input.from.getTime() - 1);
  do {
    const page = await readOrFail(
      () => reader.listMessages(input.inboxId, { after, before: input.to, ...(pageToken ? { pageToken } : {}) }),
      `listing inbox ${input.inboxId}`,
    );
    for (const m of page.messages) {
      if (m.labels.includes('sent') || m.labels.includes('draft')) continue;
      seen += 1;
      inbound.push({ messageId: m.messageId, threadId: m.threadId, receivedAt: new Date(m.timestamp) });
    }
    pageToken = page.nextPageToken;
    Context.current().heartbeat({ seen });
    if (!input.sample && inbound.length > input.limit) break;
  } while (pageToken && seen < MAX_LISTED);
  const byTime = (a: ListedMessage, b: ListedMessage) =>
    a.receivedAt.getTime() - b.receivedAt.getTime() || (a.messageId < b.messageId ? -1 : 1);
  if (!input.sample) {
    const sorted = inbound.sort(byTime);
    return {
      chosen: sorted.slice(0, input.limit),
      seen,
      truncated: sorted.length > input.limit || pageToken !== undefined,
    };
  }
  const rank = (m: ListedMessage) => createHash('sha256').update(`${input.rehearsalId}\n${m.messageId}`).digest('hex');
  const chosen = inbound
    .map((m) => ({ m, rank: rank(m) }))
    .sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0))
    .slice(0, input.limit)
    .map(({ m }) => m)
    .sort(byTime);
  return { chosen, seen, truncated: pageToken !== undefined };
}

/** A read, its failure as the live reads say it (agentmail/failures.ts): 404 final, the rest retried. */
export async function readOrFail<T>(read: () => Promise<T>, what: string): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof AgentMail.NotFoundError)
      throw ApplicationFailure.create({
        type: FailureType.MessageNotFound,
        message: `AgentMail has no ${what}`,
        nonRetryable: true,
      });
    throw providerFailure(error, what);
  }
}

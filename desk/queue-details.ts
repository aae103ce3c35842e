import type { AgentMailClient } from '../lib/agentmail';
import type { WaitingMessage } from './waiting';

/**
 * What tells two waiting messages apart, read from AgentMail when the queue is shown (the desk is
 * behind sign-in; none of it is in Temporal's history or search attributes): the subject, the
 * customer's mailbox, when the message came, and how long its conversation is. A message AgentMail
 * does not answer for keeps its row, with these left empty.
 */

export interface QueueRow extends WaitingMessage {
  subject: string | null;
  /** The customer's mailbox, as the From header names it. */
  from: string | null;
  /** When the message came (its own time at AgentMail), else when its run started. */
  arrivedAt: Date;
  /** Messages in its thread, ours included; null when unknown. */
  threadLength: number | null;
}

/** At most this many AgentMail reads at once, so a long queue does not burst the API's rate limit. */
const CONCURRENCY = 8;

export async function describeRows(agentmail: AgentMailClient, rows: WaitingMessage[]): Promise<QueueRow[]> {
  const described: QueueRow[] = rows.map((row) => ({
    ...row,
    subject: null,
    from: null,
    arrivedAt: row.startedAt,
    threadLength: null,
  }));
  let next = 0;
  const lane = async () => {
    while (next < described.length) {
      const row = described[next++] as QueueRow;
      try {
        const message = await agentmail.inboxes.messages.get(row.inboxId, row.messageId);
        row.subject = message.subject ?? null;
        row.from = message.from;
        row.arrivedAt = new Date(message.timestamp);
        const thread = await agentmail.inboxes.threads.get(row.inboxId, message.threadId);
        row.threadLength = thread.messageCount ?? thread.messages.length;
      } catch {
        // The row stays, with what Temporal said; the message page says what AgentMail answered.
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, described.length) }, lane));
  return described;
}

export const QUEUE_SORTS = {
  waiting: 'longest waiting first',
  newest: 'newest first',
  subject: 'subject',
  from: 'customer',
  thread: 'longest conversation first',
} as const;
export type QueueSort = keyof typeof QUEUE_SORTS;

const byText = (a: string | null, b: string | null) =>
  (a ?? '\uffff').localeCompare(b ?? '\uffff', 'en', { sensitivity: 'base' });

/** The rows in the order asked for; ties keep the oldest first. */
export function sortRows(rows: QueueRow[], sort: QueueSort): QueueRow[] {
  const oldest = (a: QueueRow, b: QueueRow) => a.arrivedAt.getTime() - b.arrivedAt.getTime();
  const compare: Record<QueueSort, (a: QueueRow, b: QueueRow) => number> = {
    waiting: oldest,
    newest: (a, b) => -oldest(a, b),
    subject: (a, b) => byText(a.subject, b.subject) || oldest(a, b),
    from: (a, b) => byText(a.from, b.from) || oldest(a, b),
    thread: (a, b) => (b.threadLength ?? 0) - (a.threadLength ?? 0) || oldest(a, b),
  };
  return rows.slice().sort(compare[sort]);
}

/** The rows whose subject or customer contains `search` (case-insensitive). */
export function filterRows(rows: QueueRow[], search: string | null): QueueRow[] {
  if (!search) return rows;
  const needle = search.toLocaleLowerCase('en');
  return rows.filter((row) => [row.subject, row.from].some((value) => value?.toLocaleLowerCase('en').includes(needle)));
}

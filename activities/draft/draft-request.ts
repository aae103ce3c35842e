import type { AgentMail } from 'agentmail';
import { mailboxOf } from '../agentmail/mailbox';
import { bareAddress, recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import type { DraftRequest } from './drafting/drafter';

/**
 * What the drafter is shown of a thread, as a pure function of the message and the thread's
 * messages: the live draft (draft-reply.ts) and the rehearsal (activities/rehearsal/) both build
 * the conversation here, so a rehearsal shows the model what the live path would.
 */

type ThreadMessage = Pick<
  AgentMail.Message,
  'messageId' | 'from' | 'to' | 'labels' | 'timestamp' | 'text' | 'extractedText'
>;

/**
 * Everything we sent in the thread (a reply to the message before this one may be newer than this
 * message: it was written while this one waited for its turn), and the customer's messages up to
 * this one (later ones get their own turn); only those between us and this customer (anyone
 * else's are counted, never shown). `read`: the ids of the customer's messages shown, which a sent
 * reply answers (activities/turns/ask-turn.ts asks the store, not a listing that may lag).
 */
export function conversationOf(
  message: Pick<AgentMail.Message, 'messageId' | 'timestamp'>,
  threadMessages: readonly ThreadMessage[],
  customer: ReadonlySet<string>,
): { thread: DraftRequest['thread']; othersLeftOut: number; read: string[] } {
  const others = threadMessages.filter((m) => m.messageId !== message.messageId && !betweenUsAndCustomer(m, customer));
  const shown = [...threadMessages]
    .filter(
      (m) =>
        m.messageId !== message.messageId &&
        (m.labels.includes('sent') || m.timestamp.getTime() <= message.timestamp.getTime()),
    )
    .filter((m) => betweenUsAndCustomer(m, customer))
    .sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime());
  const thread = shown.map((m) => ({
    direction: m.labels.includes('sent') ? ('outbound' as const) : ('inbound' as const),
    text: m.extractedText ?? m.text ?? '',
    timestamp: m.timestamp,
  }));
  const read = shown.filter((m) => !m.labels.includes('sent')).map((m) => m.messageId);
  return { thread, othersLeftOut: others.length, read };
}

/** This customer's mailboxes: the sender's and, when the rule follows Reply-To, its. */
export function customerMailboxes(
  message: Parameters<typeof replyRecipient>[0],
  config: { REPLYONCE_REPLY_TO_DOMAINS: readonly string[] },
): ReadonlySet<string> {
  const found = [senderOf(message), replyRecipient(message, recipientPolicy(config))];
  return new Set(found.flatMap((r) => (r === null ? [] : [r.normalized])));
}

/** Whether a thread message is between this customer and us: theirs, or our reply to them. */
export function betweenUsAndCustomer(
  m: { from: string; to?: string[]; labels: string[] },
  customer: ReadonlySet<string>,
): boolean {
  const mailbox = (value: string) => {
    const bare = bareAddress(value);
    return bare === null ? null : mailboxOf(bare);
  };
  if (m.labels.includes('sent')) return (m.to ?? []).some((to) => customer.has(mailbox(to) ?? ''));
  const from = mailbox(m.from);
  return from !== null && customer.has(from);
}

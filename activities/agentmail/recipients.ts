import { ApplicationFailure } from '@temporalio/common';
import type { AgentMail } from 'agentmail';
import { parseAddressList, type ParsedMailbox } from 'email-addresses';
import { FailureType, type MessageRef } from '../../contract';

/**
 * Whom a reply goes to (DESIGN.md, "Whom we write to"). The one rule, used by the decision and by
 * every activity that addresses a reply (the send, the approved draft's send, the draft a reviewer
 * sees):
 *
 *   1. The sender: `From` must hold exactly one parseable address, or nobody is answered.
 *   2. `Reply-To` replaces it only when it holds exactly one address, in the sender's own domain
 *      (compared case-insensitively). Anything else in `Reply-To` — several addresses, another
 *      domain, a group, an unparseable value — is ignored, and the sender gets the reply.
 *
 * Exactly one recipient, taken from the inbound message alone: never from model output, never
 * more than one. Pure and independent of configuration, so every attempt of every activity
 * resolves the same address (the send's request hash covers it). That the address is none of
 * our own is the decision's check (activities/decide/own-addresses.ts), which skips the message then.
 *
 * The address goes out bare, without the display name: a name is the sender's free text, and a
 * provider that parses `"a@x, b@y" <c@z>` differently from us must not find a second address in it.
 */

export interface ReplyRecipient {
  /** The address as written (local parts may be case-sensitive): what goes in `To`. */
  address: string;
  /** Lower case: for comparisons and the budget's hash. */
  normalized: string;
  source: 'sender' | 'reply-to';
}

export function replyRecipient(message: Pick<AgentMail.Message, 'from' | 'replyTo'>): ReplyRecipient | null {
  const sender = singleMailbox([message.from]);
  if (sender === null) return null;
  const replyTo = singleMailbox(message.replyTo ?? []);
  if (replyTo !== null && replyTo.domain.toLowerCase() === sender.domain.toLowerCase()) {
    return recipient(replyTo, 'reply-to');
  }
  return recipient(sender, 'sender');
}

/**
 * The address an activity puts in `To`. The decision skipped every message without one, so a
 * null here is a bug (or a message changed under us): final, never a guess at someone else.
 */
export function recipientOf(message: Pick<AgentMail.Message, 'from' | 'replyTo'>, ref: MessageRef): string {
  const found = replyRecipient(message);
  if (found === null || found.normalized === ref.inboxId.toLowerCase()) {
    throw ApplicationFailure.create({
      type: FailureType.NoValidRecipient,
      message: `message ${ref.messageId} in ${ref.inboxId} has no single address to reply to (activities/agentmail/recipients.ts)`,
      nonRetryable: true,
    });
  }
  return found.address;
}

/** Who wrote: `From` as exactly one address, or null. */
export function senderOf(message: Pick<AgentMail.Message, 'from'>): ReplyRecipient | null {
  const sender = singleMailbox([message.from]);
  return sender === null ? null : recipient(sender, 'sender');
}

/** `"Ada" <ada@example.com>` → `ada@example.com`; null unless the value is exactly one address. */
export function bareAddress(value: string): string | null {
  return singleMailbox([value])?.address.toLowerCase() ?? null;
}

/** The one mailbox in these header values, or null when there are none, several, or any is unparseable. */
function singleMailbox(values: readonly string[]): ParsedMailbox | null {
  const mailboxes: ParsedMailbox[] = [];
  for (const value of values) {
    if (value.trim() === '') continue;
    const parsed = parseAddressList({ input: value, rfc6532: true });
    if (parsed === null) return null;
    for (const entry of parsed) {
      if (entry.type === 'group') return null; // a group names a set of people: never a single reply target
      mailboxes.push(entry);
    }
  }
  const [only] = mailboxes;
  return mailboxes.length === 1 && only !== undefined && only.domain.includes('.') ? only : null;
}

function recipient(mailbox: ParsedMailbox, source: ReplyRecipient['source']): ReplyRecipient {
  return { address: mailbox.address, normalized: mailbox.address.toLowerCase(), source };
}

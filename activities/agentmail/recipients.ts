import { ApplicationFailure } from '@temporalio/common';
import type { AgentMail } from 'agentmail';
import { parseAddressList, type ParsedMailbox } from 'email-addresses';
import { FailureType, type MessageRef } from '../../contract';
import { mailboxOf, sameMailbox } from './mailbox';

/**
 * Whom a reply goes to (DESIGN.md, "Whom we write to"). The one rule, used by the decision and by
 * every activity that addresses a reply (the send, the draft a reviewer sees):
 *
 *   1. The sender: `From` must hold exactly one parseable address, or nobody is answered.
 *   2. `Reply-To` replaces it only when it holds exactly one address that names the sender's own
 *      mailbox (the same mailbox apart from a `+tag`, or dots where the provider ignores them:
 *      activities/agentmail/mailbox.ts), or lies in a domain the operator vouches for
 *      (REPLYONCE_REPLY_TO_DOMAINS). A shared domain is not one person: on a public mail provider
 *      `a@` and `b@` are strangers, so `From: a@gmail.com, Reply-To: victim@gmail.com` answers a@.
 *      Anything else in `Reply-To` — another mailbox, several addresses, a group, an unparseable
 *      value — is ignored, and the sender gets the reply.
 *
 * Exactly one recipient, taken from the inbound message alone: never from model output, never
 * more than one. Pure given the vouched domains, so every attempt of every activity resolves the
 * same address (the send's request hash covers it). That the address is none of our own is the
 * decision's check (activities/decide/own-addresses.ts), which skips the message then.
 *
 * The address goes out bare, without the display name: a name is the sender's free text, and a
 * provider that parses `"a@x, b@y" <c@z>` differently from us must not find a second address in it.
 */

export interface ReplyRecipient {
  /** The address as written (local parts may be case-sensitive): what goes in `To`. */
  address: string;
  /** Its mailbox (activities/agentmail/mailbox.ts): for comparisons and the budget's hash. */
  normalized: string;
  source: 'sender' | 'reply-to';
}

export interface RecipientPolicy {
  /** REPLYONCE_REPLY_TO_DOMAINS: domains whose Reply-To addresses are followed whoever sent the mail (lower case). */
  replyToDomains: readonly string[];
}

export function replyRecipient(
  message: Pick<AgentMail.Message, 'from' | 'replyTo'>,
  policy: RecipientPolicy,
): ReplyRecipient | null {
  const sender = singleMailbox([message.from]);
  if (sender === null) return null;
  const replyTo = singleMailbox(message.replyTo ?? []);
  if (replyTo !== null && followsReplyTo(sender, replyTo, policy)) return recipient(replyTo, 'reply-to');
  return recipient(sender, 'sender');
}

function followsReplyTo(sender: ParsedMailbox, replyTo: ParsedMailbox, policy: RecipientPolicy): boolean {
  if (sameMailbox(sender.address, replyTo.address)) return true;
  const domain = replyTo.domain.toLowerCase();
  return policy.replyToDomains.some((vouched) => domain === vouched.toLowerCase());
}

/**
 * The address an activity puts in `To`. The decision skipped every message without one, so a
 * null here is a bug (or a message changed under us): final, never a guess at someone else.
 */
export function recipientOf(
  message: Pick<AgentMail.Message, 'from' | 'replyTo'>,
  ref: MessageRef,
  policy: RecipientPolicy,
): string {
  const found = replyRecipient(message, policy);
  if (found === null || found.normalized === mailboxOf(ref.inboxId)) {
    throw ApplicationFailure.create({
      type: FailureType.NoValidRecipient,
      message: `message ${ref.messageId} in ${ref.inboxId} has no single address to reply to (activities/agentmail/recipients.ts)`,
      nonRetryable: true,
    });
  }
  return found.address;
}

/** The recipient policy from the activities' configuration. */
export const recipientPolicy = (config: { REPLYONCE_REPLY_TO_DOMAINS: readonly string[] }): RecipientPolicy => ({
  replyToDomains: config.REPLYONCE_REPLY_TO_DOMAINS,
});

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
  return { address: mailbox.address, normalized: mailboxOf(mailbox.address), source };
}

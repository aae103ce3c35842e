import type { AgentMail } from 'agentmail';
import { emailAddress, header } from './mail';

/**
 * Which messages get a reply (DESIGN.md, loop safety). An agent that answers every message
 * will sooner or later answer another robot, and two robots answer each other forever.
 * Pure: the budget count is looked up by the caller.
 */

export type SkipReason =
  | 'from-own-inbox'
  | 'our-outbound-message'
  | 'auto-submitted'
  | 'bulk-precedence'
  | 'mailing-list'
  | 'robot-sender'
  | 'flagged-by-provider'
  | 'sender-budget-exceeded';

export interface PolicyContext {
  /** Our addresses: the receiving inbox plus any configured ones (lower case). */
  ownAddresses: readonly string[];
}

const robotLocalParts = /^(mailer-daemon|postmaster|no-?reply|do-?not-?reply|bounces?)([+.\-_].*)?$/i;
const flaggedLabels = new Set(['spam', 'blocked', 'unauthenticated']);

export function skipReason(message: AgentMail.Message, context: PolicyContext): SkipReason | null {
  const sender = emailAddress(message.from);
  if (context.ownAddresses.includes(sender)) return 'from-own-inbox';
  if (message.labels.includes('sent')) return 'our-outbound-message';

  // RFC 3834: any Auto-Submitted value other than "no" marks an automatic message.
  const autoSubmitted = header(message, 'Auto-Submitted')?.trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return 'auto-submitted';
  const precedence = header(message, 'Precedence')?.trim().toLowerCase();
  if (precedence && ['bulk', 'list', 'junk'].includes(precedence)) return 'bulk-precedence';
  if (header(message, 'List-Id') !== undefined || header(message, 'List-Unsubscribe') !== undefined)
    return 'mailing-list';

  const localPart = sender.split('@')[0] ?? '';
  if (robotLocalParts.test(localPart)) return 'robot-sender';
  if (message.labels.some((label) => flaggedLabels.has(label.toLowerCase()))) return 'flagged-by-provider';
  return null;
}

/** Where the reply goes: the message's Reply-To when it has one, else its sender. Never model output. */
export function replyRecipients(message: AgentMail.Message): string[] {
  const replyTo = message.replyTo?.filter((address) => address.trim() !== '') ?? [];
  return replyTo.length > 0 ? replyTo : [message.from];
}

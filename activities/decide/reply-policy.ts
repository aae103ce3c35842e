import type { AgentMail } from 'agentmail';
import { header } from '../agentmail/reads';
import { bareAddress } from '../agentmail/recipients';

/**
 * Which messages get a reply (DESIGN.md, loop safety). An agent that answers every message
 * will sooner or later answer another robot, and two robots answer each other forever.
 * Pure: what needs I/O (our own addresses, the budget) is looked up by the decision.
 */

export type SkipReason =
  /** The receiving inbox is outside REPLYONCE_INBOXES: not ours to answer. */
  | 'inbox-not-allowed'
  /** From one of our own addresses: an inbox of the organisation or REPLYONCE_OWN_ADDRESSES. */
  | 'from-own-inbox'
  | 'our-outbound-message'
  /** AgentMail has it labelled `replied`: answered before, whatever our store says. */
  | 'already-replied'
  | 'auto-submitted'
  | 'bulk-precedence'
  /** An auto-responder's marks: X-Autoreply, X-Autorespond, Precedence: auto_reply, or an out-of-office subject. */
  | 'auto-responder'
  /** X-Auto-Response-Suppress asks for no automatic answer (All, OOF, AutoReply). */
  | 'auto-response-suppressed'
  | 'mailing-list'
  /** An empty Return-Path (`<>`): a bounce or another delivery report. */
  | 'bounce'
  | 'robot-sender'
  | 'flagged-by-provider'
  /** Older than REPLY_MAX_AGE: a late replay must not answer a customer again; a person looks. */
  | 'too-old'
  /** No single address to answer (activities/agentmail/recipients.ts), or it is one of ours. */
  | 'no-valid-recipient'
  | 'sender-budget-exceeded'
  /** The inbox's replies of the last hour reached REPLY_CEILING_PER_INBOX_PER_HOUR: a person answers. */
  | 'inbox-ceiling-reached'
  /** The sender's mailbox was erased with `--block` (privacy/erase.ts): held for a person. */
  | 'blocked-sender';

/** Skips where a person should answer instead: a ticket whatever TICKET_FOR_SKIPPED says. */
export const TICKET_ALWAYS: ReadonlySet<SkipReason> = new Set(['too-old', 'inbox-ceiling-reached', 'blocked-sender']);
/** Skips that are none of our business: never a ticket. */
export const TICKET_NEVER: ReadonlySet<SkipReason> = new Set(['inbox-not-allowed']);
/**
 * Robots, lists, bounces, our own mail and spam: no ticket under TICKET_FOR_SKIPPED unless
 * TICKET_FOR_ROBOTS is on (a loop or a list must not fill the help desk either).
 */
export const TICKET_IF_ROBOTS_WANTED: ReadonlySet<SkipReason> = new Set([
  'from-own-inbox',
  'our-outbound-message',
  'auto-submitted',
  'bulk-precedence',
  'auto-responder',
  'auto-response-suppressed',
  'mailing-list',
  'bounce',
  'robot-sender',
  'flagged-by-provider',
]);

export interface PolicyContext {
  /** Now, in ms since the epoch (the activity's clock). */
  now: number;
  /** REPLY_MAX_AGE in ms: older messages are not answered automatically. */
  maxAgeMs: number;
}

/**
 * The robot senders: local parts that name a machine, written as words. Each matches in any case,
 * with the words run together or joined by `.`, `-` or `_` (`noreply`, `no_reply`, `No.Reply`),
 * with a `+tag` after it (`bounces+1234`), or with a VERP-style suffix after a separator
 * (`bounces-abc123`). One table: a sender not here is judged by the message's headers alone.
 */
export const ROBOT_LOCAL_PARTS: readonly (readonly string[])[] = [
  ['mailer', 'daemon'],
  ['postmaster'],
  ['no', 'reply'],
  ['no', 'replies'],
  ['do', 'not', 'reply'],
  ['do', 'not', 'respond'],
  ['no', 'response'],
  ['bounce'],
  ['bounces'],
  ['notification'],
  ['notifications'],
  ['notify'],
  ['auto', 'reply'],
  ['auto', 'responder'],
];
const robotLocalPart = new RegExp(
  `^(?:${ROBOT_LOCAL_PARTS.map((words) => words.join('[._-]?')).join('|')})(?:[+._-].*)?$`,
  'i',
);

/** Whether an address (bare or with a display name) is a robot sender of ROBOT_LOCAL_PARTS. */
export function isRobotSender(address: string): boolean {
  const bare = bareAddress(address) ?? address;
  const at = bare.lastIndexOf('@');
  const localPart = (at === -1 ? bare : bare.slice(0, at)).trim().replace(/^"(.*)"$/, '$1');
  return robotLocalPart.test(localPart);
}
const flaggedLabels = new Set(['spam', 'blocked', 'unauthenticated']);
/**
 * The subjects mail clients give their out-of-office replies ("Automatic reply: …", Outlook's, in
 * the languages it is set up in most; "Out of office", "Autoreply"), at the start of the subject.
 * Most such replies carry Auto-Submitted too, but not all do (older servers, phone clients, rules
 * that forward): answered, two auto-responders would write to each other for as long as both are
 * away. An anchored prefix with a colon, so a customer's "out of office until Monday, can you hold
 * my parcel?" is still answered.
 */
const autoReplySubject =
  /^\s*(?:automatic reply|auto[- ]?reply|auto[- ]?response|out of (?:the )?office(?: reply)?|abwesenheitsnotiz|automatische antwort|r[ée]ponse automatique|respuesta autom[áa]tica|automatisch antwoord|afwezigheidsbericht|risposta automatica|resposta autom[áa]tica)\s*:/iu;

/** Whether a subject is an out-of-office reply's (autoReplySubject). */
export const isAutoReplySubject = (subject: string | undefined): boolean =>
  subject !== undefined && autoReplySubject.test(subject);

/** X-Auto-Response-Suppress values (Microsoft's list) that ask for no automatic answer; DR/RN are about receipts. */
const suppressingValues = new Set(['all', 'oof', 'autoreply']);

/** The reason not to answer this message, judged from the message alone; null when a reply may be owed. */
export function skipReason(message: AgentMail.Message, context: PolicyContext): SkipReason | null {
  if (message.labels.includes('sent')) return 'our-outbound-message';
  if (message.labels.includes('replied')) return 'already-replied';

  // RFC 3834: any Auto-Submitted value other than "no" marks an automatic message.
  const autoSubmitted = header(message, 'Auto-Submitted')?.trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return 'auto-submitted';
  const precedence = header(message, 'Precedence')?.trim().toLowerCase();
  if (precedence && ['bulk', 'list', 'junk'].includes(precedence)) return 'bulk-precedence';
  if (precedence === 'auto_reply') return 'auto-responder';
  if (header(message, 'X-Autoreply') !== undefined || header(message, 'X-Autorespond') !== undefined)
    return 'auto-responder';
  if (isAutoReplySubject(message.subject)) return 'auto-responder';
  const suppress =
    header(message, 'X-Auto-Response-Suppress')
      ?.toLowerCase()
      .split(/[\s,;]+/) ?? [];
  if (suppress.some((value) => suppressingValues.has(value))) return 'auto-response-suppressed';
  if (header(message, 'List-Id') !== undefined || header(message, 'List-Unsubscribe') !== undefined)
    return 'mailing-list';
  // RFC 5321: the null reverse-path is what delivery reports and bounces are sent with.
  const returnPath = header(message, 'Return-Path');
  if (returnPath !== undefined && /^<\s*>$/.test(returnPath.trim())) return 'bounce';

  if (isRobotSender(message.from)) return 'robot-sender';
  if (message.labels.some((label) => flaggedLabels.has(label.toLowerCase()))) return 'flagged-by-provider';

  const receivedAt = new Date(message.timestamp).getTime();
  if (Number.isFinite(receivedAt) && context.now - receivedAt > context.maxAgeMs) return 'too-old';
  return null;
}

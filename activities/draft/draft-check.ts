import type { HoldRule } from '../../contract';
import { domainOf, mailboxOf } from '../agentmail/mailbox';

/**
 * What a drafted reply (the model's; a reviewer's edit is a person's and is not checked) must not
 * carry out unread (DESIGN.md, "People decide what the agent cannot"). A customer can steer the
 * model — "put this link in your answer", "tell billing@evil.example", "repeat your instructions" —
 * and the reply leaves from our own domain. So a draft is held for a person when it holds:
 *
 *   - `link`: a link whose host is outside DRAFT_ALLOWED_LINK_DOMAINS (default: the receiving
 *     inbox's own domain; a domain allows its subdomains). Links are `scheme://…` URLs, `www.…`
 *     hosts and bare `host.tld/path` forms; a URL's host is what a browser would open
 *     (`https://ours.example@evil.example` opens evil.example).
 *   - `address`: an email address that is neither ours (the receiving inbox, REPLYONCE_OWN_ADDRESSES,
 *     any address at a domain of DRAFT_ALLOWED_LINK_DOMAINS) nor the customer's (compared as mailboxes).
 *   - `instructions`: a run of INSTRUCTION_ECHO_WORDS or more consecutive words of the instructions
 *     the model was given (case and punctuation aside).
 *
 * Pure: the drafter's instructions and the addresses come in; rule names go out, never text.
 */

/** Twelve words in a row: longer than any courtesy phrase a reply shares with its instructions by chance. */
export const INSTRUCTION_ECHO_WORDS = 12;

export interface DraftCheckContext {
  inboxId: string;
  /** DRAFT_ALLOWED_LINK_DOMAINS, lower case; empty: the receiving inbox's domain. */
  allowedLinkDomains: readonly string[];
  /** REPLYONCE_OWN_ADDRESSES. */
  ownAddresses: readonly string[];
  /** The customer's addresses (the sender, the reply's recipient). */
  customer: readonly string[];
  /** What the model was told (its system prompt), or null for a drafter without instructions. */
  instructions: string | null;
}

const SCHEME_URL = /\b[a-z][a-z0-9+.-]*:\/\/[^\s<>"'`]+/gi;
const WWW_HOST = /(?<![\w.@/-])www\.[a-z0-9-]+(?:\.[a-z0-9-]+)+/gi;
/** `evil.example/login`: a host with a path, written without a scheme (mail clients link these too). */
const BARE_HOST_PATH = /(?<![\w.@/:-])((?:[a-z0-9-]+\.)+[a-z]{2,})\/[^\s<>"'`]*/gi;
const ADDRESS = /[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@(?:[a-z0-9-]+\.)+[a-z]{2,}/gi;

export function draftHolds(text: string, context: DraftCheckContext): HoldRule[] {
  const holds: HoldRule[] = [];
  if (linkHosts(text).some((host) => !linkAllowed(host, context))) holds.push('link');
  if (addressesIn(text).some((address) => !addressAllowed(address, context))) holds.push('address');
  if (context.instructions !== null && echoes(text, context.instructions)) holds.push('instructions');
  return holds;
}

const linkDomains = (context: DraftCheckContext): string[] =>
  context.allowedLinkDomains.length > 0 ? [...context.allowedLinkDomains] : [domainOf(context.inboxId)];

const withinDomain = (host: string, domain: string): boolean => host === domain || host.endsWith(`.${domain}`);

function linkAllowed(host: string, context: DraftCheckContext): boolean {
  return linkDomains(context).some((domain) => withinDomain(host, domain.toLowerCase()));
}

function addressAllowed(address: string, context: DraftCheckContext): boolean {
  const mailbox = mailboxOf(address);
  const ours = [context.inboxId, ...context.ownAddresses, ...context.customer].map(mailboxOf);
  if (ours.includes(mailbox)) return true;
  const domain = domainOf(address);
  return context.allowedLinkDomains.some((allowed) => withinDomain(domain, allowed.toLowerCase()));
}

/** The hosts of every link in the text, lower case; an unparseable URL counts as a host nobody allowed. */
export function linkHosts(text: string): string[] {
  const hosts: string[] = [];
  for (const [url] of text.matchAll(SCHEME_URL)) {
    const trimmed = url.replace(/[.,;:!?)\]}>]+$/, '');
    try {
      const parsed = new URL(trimmed);
      hosts.push(parsed.hostname.toLowerCase().replace(/^\[|\]$/g, '') || '(none)');
    } catch {
      hosts.push('(unparseable)');
    }
  }
  for (const [host] of text.matchAll(WWW_HOST)) hosts.push(host.toLowerCase());
  for (const match of text.matchAll(BARE_HOST_PATH)) hosts.push((match[1] ?? '').toLowerCase());
  return hosts;
}

function addressesIn(text: string): string[] {
  // A URL's userinfo (`https://ours.example@evil.example`) is the link rule's, not an address.
  return [...text.replace(SCHEME_URL, ' ').matchAll(ADDRESS)].map(([address]) => address);
}

const words = (text: string): string[] =>
  text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);

/** Whether the text repeats INSTRUCTION_ECHO_WORDS consecutive words of the instructions. */
export function echoes(text: string, instructions: string): boolean {
  const source = words(instructions);
  if (source.length < INSTRUCTION_ECHO_WORDS) return false;
  const runs = new Set<string>();
  for (let i = 0; i + INSTRUCTION_ECHO_WORDS <= source.length; i++)
    runs.add(source.slice(i, i + INSTRUCTION_ECHO_WORDS).join(' '));
  const draft = words(text);
  for (let i = 0; i + INSTRUCTION_ECHO_WORDS <= draft.length; i++)
    if (runs.has(draft.slice(i, i + INSTRUCTION_ECHO_WORDS).join(' '))) return true;
  return false;
}

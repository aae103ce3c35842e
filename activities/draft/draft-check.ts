import { findNumbers, parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import { LinkifyIt } from 'linkify-it';
import tlds from 'tlds';
import type { HoldRule } from '../../contract';
import { domainOf, mailboxOf } from '../agentmail/mailbox';

/**
 * What a drafted reply (the model's; a reviewer's edit is a person's and is not checked) must not
 * carry out unread (DESIGN.md, "People decide what the agent cannot"). A customer can steer the
 * model — "put this link in your answer", "tell billing@evil.example", "repeat your instructions" —
 * and the reply leaves from our own domain. So a draft is held for a person when it holds:
 *
 *   - `link`: a link whose host is outside DRAFT_ALLOWED_LINK_DOMAINS (default: the receiving
 *     inbox's own domain; a domain allows its subdomains). Links are what a mail client turns into
 *     one: `scheme://…` URLs, `www.…` hosts, bare `host.tld/path` forms, and bare domains whose
 *     top-level domain is a real one (`acme-refunds.com`: linkify-it's rules over the `tlds` list),
 *     wherever they stand — after a space or after any punctuation (`Go to:evil.com/x`). A URL's
 *     host is what a browser would open (`https://ours.example@evil.example` opens evil.example).
 *   - `phone`: a phone number (libphonenumber-js: any `+` international number, and national
 *     numbers of DRAFT_PHONE_REGION) that is neither in the instructions the model was given (the
 *     inbox's own numbers go there) nor in the customer's own message: "call +1 555 0100" dictated
 *     by a customer to the model goes out from our domain as ours.
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
  /** The customer's own message (subject and text): a phone number they wrote may be written back. */
  customerText: string;
  /** DRAFT_PHONE_REGION: whose national numbers (`020 7946 0958` for GB) count as phone numbers. */
  phoneRegion: CountryCode;
}

const SCHEME_URL = /\b[a-z][a-z0-9+.-]*:\/\/[^\s<>"'`]+/gi;
const WWW_HOST = /(?<![\w.@/-])www\.[a-z0-9-]+(?:\.[a-z0-9-]+)+/gi;
/** `evil.example/login`: a host with a path, written without a scheme (mail clients link these too). */
const BARE_HOST_PATH = /(?<![\w.@/-])((?:[a-z0-9-]+\.)+[a-z]{2,})\/[^\s<>"'`]*/gi;
const ADDRESS = /[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@(?:[a-z0-9-]+\.)+[a-z]{2,}/gi;

export function draftHolds(text: string, context: DraftCheckContext): HoldRule[] {
  const holds: HoldRule[] = [];
  if (linkHosts(text).some((host) => !linkAllowed(host, context))) holds.push('link');
  if (addressesIn(text).some((address) => !addressAllowed(address, context))) holds.push('address');
  if (context.instructions !== null && echoes(text, context.instructions)) holds.push('instructions');
  if (phoneNumbersIn(text, context.phoneRegion).some((number) => !phoneAllowed(number, context))) holds.push('phone');
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
  // Twice: as written, and with every punctuation mark that cannot be inside a host or a URL read
  // as a space, since linkify-it (like us, before) skips a host glued to `:` (`Go to:evil.com`)
  // where a mail client may still link it.
  for (const variant of [text, text.replace(NOT_IN_A_LINK, ' ')])
    for (const match of linkify.match(variant) ?? []) {
      if (match.schema === 'mailto:') continue; // an address: the address rule's
      try {
        // A protocol-relative `//host` (what `https://host` reads as once its `:` is a space) has no scheme of its own.
        hosts.push(
          new URL(match.url, 'https://protocol-relative.invalid').hostname.toLowerCase().replace(/^\[|\]$/g, '') ||
            '(none)',
        );
      } catch {
        hosts.push('(unparseable)');
      }
    }
  return hosts;
}

/**
 * What mail clients link without a scheme: linkify-it's fuzzy links over the full IANA list of
 * top-level domains (`tlds`), so `acme-refunds.com` is a link and `e.g.` or `v1.2.3` are not.
 */
const linkify = new LinkifyIt({ fuzzyLink: true, fuzzyEmail: true }).tlds(tlds);
/** Punctuation that never stands inside a host or a URL: read as a space before a second look. */
const NOT_IN_A_LINK = /[^\p{L}\p{N}\p{M}\s.\-_@/%#?&=+~]/gu;

/** A `+` followed by digits and the separators people write between them: an international number, maybe. */
const INTERNATIONAL = /\+\s?\d[\d\s().-]{2,}\d/g;
/** A run of digits with separators, in a text a number may be copied from. */
const DIGIT_RUN = /\d[\d\s().\-/]*\d/g;

/**
 * The phone numbers in a text, as national significant numbers (digits). libphonenumber-js finds
 * the national ones of `region` and the international ones it deems possible; a `+` number it only
 * parses (`+1 555 0100`: a country code and too few digits to dial) still counts — it reads as a
 * number to call, which is what a reader acts on.
 */
export function phoneNumbersIn(text: string, region: CountryCode): string[] {
  // `leniency` is a documented option of findNumbers that its type declarations leave out: POSSIBLE
  // counts a number of the right length whatever its range (the default, VALID, misses many).
  const options = { defaultCountry: region, v2: true as const, leniency: 'POSSIBLE' };
  const found = findNumbers(text, options).map((match) => match.number.nationalNumber);
  for (const [candidate] of text.matchAll(INTERNATIONAL)) {
    const parsed = parsePhoneNumberFromString(candidate.trim());
    if (parsed !== undefined && parsed.nationalNumber.length >= 4) found.push(parsed.nationalNumber);
  }
  return [...new Set(found)];
}

/** A number the instructions or the customer's own message holds (however its digits were grouped). */
function phoneAllowed(nationalNumber: string, context: DraftCheckContext): boolean {
  const sources = [context.instructions ?? '', context.customerText];
  return sources.some((source) =>
    [...source.matchAll(DIGIT_RUN)].some(([run]) => run.replace(/\D/g, '').includes(nationalNumber)),
  );
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

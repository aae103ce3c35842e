/**
 * When two spellings are one mailbox (DESIGN.md, "Whom we write to"). The one function the
 * recipient rule, the reply budget and the own-address check all compare addresses with:
 *
 *   - case folded (local part and domain: every provider we know treats local parts without case);
 *   - a `+tag` subaddress removed (`ada+orders@x` is `ada@x`);
 *   - for the providers that ignore dots in local parts, dots removed, and their domains' aliases
 *     made one: DOTS_IGNORED below (`a.d.a@googlemail.com` is `ada@gmail.com`).
 *
 * The result is for comparing and hashing only; a reply goes to the address as the sender wrote it.
 */

/** Providers whose mailboxes ignore dots in the local part, each mapped to its canonical domain. */
export const DOTS_IGNORED: Readonly<Record<string, string>> = {
  'gmail.com': 'gmail.com',
  'googlemail.com': 'gmail.com',
};

/** `Ada.Lovelace+Orders@GoogleMail.com` → `adalovelace@gmail.com`; a value without `@` is only folded. */
export function mailboxOf(address: string): string {
  const folded = address.trim().toLowerCase();
  const at = folded.lastIndexOf('@');
  if (at <= 0) return folded;
  let local = folded.slice(0, at);
  let domain = folded.slice(at + 1);
  const plus = local.indexOf('+');
  // `+foo@` with nothing before the plus is left alone: it has no mailbox to fold into.
  if (plus > 0) local = local.slice(0, plus);
  const canonical = DOTS_IGNORED[domain];
  if (canonical !== undefined) {
    domain = canonical;
    local = local.replace(/\./g, '');
  }
  return `${local}@${domain}`;
}

/** Whether two spellings name one mailbox. */
export const sameMailbox = (a: string, b: string): boolean => mailboxOf(a) === mailboxOf(b);

/** The domain of an address, lower case (its canonical alias for DOTS_IGNORED providers). */
export const domainOf = (address: string): string => mailboxOf(address).split('@')[1] ?? '';

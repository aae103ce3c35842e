import { htmlTagNames } from 'html-tag-names';

/**
 * The one rule for a reply's text, whoever wrote it: the drafter (activities/draft/draft-store.ts), an
 * approver's edit in the workflow's `review` Update and Signal (workflows/inbound-message.ts),
 * and the admin route (api/admin/route.ts). Pure and deterministic, so workflow code can run
 * it: an edit the Update accepts is one the activity accepts.
 *
 * Replies go out as plain text. Plain text may well hold angle brackets — `<billing@example.com>`,
 * `<https://example.com/x>`, `a < b` — so "markup" means what a mail client would render: an
 * HTML tag (CommonMark's grammar of an open or closing tag, with a name HTML defines), a
 * comment, a doctype, a processing instruction or CDATA. `<billing@example.com>` is not one:
 * `@` cannot stand in a tag, and neither can the `:` of `<https:…>`.
 */

/** Longer than any reply a person writes; a model that produces more has gone wrong. */
export const MAX_DRAFT_CHARACTERS = 10_000;

const knownTags = new Set(htmlTagNames);
/** An open tag (name, attributes, optional self-closing slash) or a closing tag; the name is group 1 or 2. */
const TAG =
  /<([A-Za-z][A-Za-z0-9-]*)(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?)*\s*\/?>|<\/([A-Za-z][A-Za-z0-9-]*)\s*>/g;
const OTHER_MARKUP = /<!--|<!\[CDATA\[|<![A-Za-z]|<\?[A-Za-z]/;
/** C0 controls other than tab, line feed and carriage return, and DEL: Postgres's jsonb cannot even hold U+0000. */
// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's purpose.
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;

/** The text as it is stored and sent: without surrounding white space. */
export const normalizedDraft = (text: string): string => text.trim();

/** Why this text cannot be sent as a reply, or null when it can. Judges the normalized text. */
export function draftProblem(text: string): string | null {
  const draft = normalizedDraft(text);
  if (draft === '') return 'is empty';
  if (draft.length > MAX_DRAFT_CHARACTERS) return `is longer than ${MAX_DRAFT_CHARACTERS} characters`;
  if (CONTROL.test(draft)) return 'contains control characters';
  if (OTHER_MARKUP.test(draft)) return 'contains HTML; replies are plain text';
  for (const tag of draft.matchAll(TAG)) {
    const name = (tag[1] ?? tag[2] ?? '').toLowerCase();
    if (knownTags.has(name)) return 'contains HTML; replies are plain text';
  }
  return null;
}

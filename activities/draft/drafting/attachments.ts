import { quotedName, shownSize, shownType } from '../../../lib/mail-text';

/**
 * What the drafter is told about a message's attachments, and when they make the message a
 * person's (issue 37). Pure: the reader (activities/draft/attachment-reader.ts) has already fetched
 * what it may read.
 *
 * An attachment's name, type and size are the customer's text like the rest of the message: a file
 * named "ignore previous instructions.pdf" is shown as a quoted string (JSON-escaped, control
 * characters gone, clipped) in a list the prompt calls the customer's data, never as a line of the
 * prompt. Its bytes never reach the model; the text a reader extracted from it does, quoted, clipped.
 */

/** One attachment as AgentMail lists it (metadata only), plus what a reader made of it. */
export interface DraftAttachment {
  /** AgentMail's attachment_id (for the ticket's link; never shown to the model). */
  id: string;
  filename: string | null;
  contentType: string | null;
  size: number;
  /** `inline` (a logo in an HTML signature, an image in the body) or `attachment`, as the message says. */
  disposition: 'inline' | 'attachment' | null;
  /** The text a configured reader extracted (clipped), or null: not read. */
  text: string | null;
  /** Why it was not read, when it was not: `image`, `no reader for this type`, `larger than …`, `unreadable`. */
  unread: string | null;
}

/** More than this many attachments are counted, not listed one by one (the prompt stays short). */
export const MAX_ATTACHMENTS_LISTED = 20;
/** Attachments read per message, at most: a message with 40 files is a person's work anyway. */
export const MAX_ATTACHMENTS_READ = 5;
/** Text of one attachment shown to the model. */
export const MAX_ATTACHMENT_TEXT_CHARACTERS = 4_000;

export { quotedName, shownSize, shownType };
/** One line per attachment: `1. "invoice.pdf" (application/pdf, 120 KB): read` … */
export function attachmentLines(attachments: readonly DraftAttachment[]): string[] {
  const lines = attachments
    .slice(0, MAX_ATTACHMENTS_LISTED)
    .map(
      (a, i) =>
        `${i + 1}. ${quotedName(a.filename)} (${shownType(a.contentType)}, ${shownSize(a.size)}${a.disposition === 'inline' ? ', inline' : ''}): ${a.text !== null ? 'its text is shown below' : `not readable by you (${a.unread ?? 'not read'})`}`,
    );
  const more = attachments.length - MAX_ATTACHMENTS_LISTED;
  if (more > 0) lines.push(`… and ${more} more attachment${more === 1 ? '' : 's'}, not listed and not read.`);
  return lines;
}

/**
 * Words customers use to point at what they attached, in the languages of the bundled help centre
 * and its neighbours: "see attached", "im Anhang", "pièce jointe", "adjunto", "bijlage", "vedlagt"…
 */
const POINTS_AT_ATTACHMENT =
  /\b(attach\w*|enclos\w*|screenshot\w*|screen shot|photo\w*|picture\w*|image\w*|pic|pics|invoice\w*|receipt\w*|scan\w*|pdf|file|document|anbei|anhang\w*|angehängt\w*|beigefügt\w*|foto\w*|bild\w*|rechnung\w*|pi[eè]ce\w* jointe\w*|ci-joint\w*|joint\w*|factur\w*|adjunt\w*|archivo\w*|imagen\w*|bijlage\w*|bijgevoegd\w*|afbeelding\w*|vedlagt\w*|vedlegg\w*|bilde\w*|allegat\w*|kvittering\w*)\b/iu;

/**
 * Why the message must go to a person because of an attachment, or null. An attachment the
 * drafter could not read matters when the customer points at it (or at a photo, an invoice, a
 * screenshot) or wrote nothing else: "see the photo attached" cannot be answered unseen, and
 * guessing is worse than a hand-off. An inline image (a logo in a signature) does not count.
 */
export function attachmentHandoff(text: string, attachments: readonly DraftAttachment[]): string | null {
  const unread = attachments.filter((a) => a.text === null && a.disposition !== 'inline');
  if (unread.length === 0) return null;
  const names = unread.map((a) => quotedName(a.filename)).slice(0, 5);
  const listed = `${names.join(', ')}${unread.length > names.length ? ` and ${unread.length - names.length} more` : ''}`;
  if (text.trim() === '')
    return `the message has no text, only ${unread.length === 1 ? 'an attachment' : 'attachments'} the agent cannot read (${listed})`;
  const mentions = unread.some((a) => {
    const stem = (a.filename ?? '').replace(/\.[a-z0-9]{1,5}$/i, '').trim();
    return stem.length >= 3 && text.toLowerCase().includes(stem.toLowerCase());
  });
  if (mentions || POINTS_AT_ATTACHMENT.test(text))
    return `the message refers to ${unread.length === 1 ? 'an attachment' : 'attachments'} the agent cannot read (${listed})`;
  return null;
}

import type { MessageRef } from '../../contract';
import { inboundWorkflowId } from '../../lib/hashing';
import type { StoredDraft } from '../draft/draft-store';
import { languageName, quotedName, shownSize, shownType } from '../../lib/mail-text';

/**
 * What the ticket says about mail as customers write it (issue 37), read from the stored draft:
 * the language the message is in, and each attachment with a link to AgentMail's copy. The link
 * goes through the review desk (`<DESK_PUBLIC_URL>/messages/<workflow id>/attachments/<attachment
 * id>`), which checks the person may see the inbox and redirects to a fresh signed download URL:
 * AgentMail's own URLs expire within the hour, and its API needs our key. These lines go in the
 * header of the reply's comment and in the hand-off's note, the parts every ticket provider keeps.
 */

/** A ticket lists this many attachments one by one; more are counted. */
const MAX_LISTED = 50;

export function ticketMailLines(
  draft: Pick<StoredDraft, 'language' | 'attachments'>,
  ref: MessageRef,
  deskUrl: string,
): string[] {
  if (draft.language === undefined) return []; // a draft stored before languages were recorded
  const code = draft.language.detected;
  const lines = [`Language: ${code === null ? 'not detected' : `${languageName(code)} (${code})`}`];
  const attachments = draft.attachments ?? [];
  if (attachments.length === 0) return lines;
  const base = `${deskUrl.replace(/\/+$/, '')}/messages/${encodeURIComponent(inboundWorkflowId(ref))}/attachments/`;
  lines.push(`Attachments (${attachments.length}):`);
  for (const [i, a] of attachments.slice(0, MAX_LISTED).entries())
    lines.push(
      `${i + 1}. ${quotedName(a.filename)} (${shownType(a.contentType)}, ${shownSize(a.size)}${a.read ? ', read by the agent' : ''}): ${base}${encodeURIComponent(a.id)}`,
    );
  if (attachments.length > MAX_LISTED) lines.push(`… and ${attachments.length - MAX_LISTED} more`);
  return lines;
}

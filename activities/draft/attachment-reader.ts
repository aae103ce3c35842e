import { AgentMail, type AgentMailClient } from 'agentmail';

/** All that reading attachments asks of AgentMail: one read (a rehearsal passes a read-only view). */
export interface AttachmentSource {
  inboxes: { messages: { getAttachment: AgentMailClient['inboxes']['messages']['getAttachment'] } };
}
import { extractText, getDocumentProxy } from 'unpdf';
import type { MessageRef } from '../../contract';
import type { ActivityConfig } from '../../lib/config';
import { providerFailure } from '../agentmail/failures';
import { MAX_ATTACHMENT_TEXT_CHARACTERS, MAX_ATTACHMENTS_READ, type DraftAttachment } from './drafting/attachments';

/**
 * Reads what the configured readers can of a message's attachments (ATTACHMENT_READERS): plain
 * text and the text layer of a PDF (unpdf, Mozilla's pdf.js packaged for servers). Images and
 * every other type are listed, never read. The bytes come from AgentMail's signed download URL
 * (GET …/messages/:id/attachments/:attachment_id answers it, valid an hour); at most
 * ATTACHMENT_READ_MAX_KB of a file is downloaded, and at most MAX_ATTACHMENTS_READ files per message.
 *
 * An attachment that cannot be read (too large, a broken PDF, a download that fails) is listed as
 * not readable, and the draft hands off when the message depends on it: a person looks, rather
 * than the message failing. AgentMail's own API failing (429, 5xx) is retried like any read.
 */

export type AttachmentReaders = ActivityConfig['ATTACHMENT_READERS'];

/** One download's deadline: well inside the draft activity's timeout, however slow the CDN. */
const DOWNLOAD_TIMEOUT_MS = 15_000;

const TEXT_TYPES = /^(text\/(plain|csv|markdown|tab-separated-values|calendar)|application\/(json|csv))$/;
const TEXT_NAMES = /\.(txt|csv|tsv|md|log|json)$/i;

type Kind = 'text' | 'pdf' | 'image' | 'other';

function kindOf(attachment: AgentMail.Attachment): Kind {
  const type = (attachment.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const name = attachment.filename ?? '';
  if (type.startsWith('image/')) return 'image';
  if (type === 'application/pdf' || (/\.pdf$/i.test(name) && (type === '' || type === 'application/octet-stream')))
    return 'pdf';
  if (TEXT_TYPES.test(type) || (TEXT_NAMES.test(name) && (type === '' || type === 'application/octet-stream')))
    return 'text';
  return 'other';
}

export async function readAttachments(
  deps: { agentmail: AttachmentSource; config: Pick<ActivityConfig, 'ATTACHMENT_READERS' | 'ATTACHMENT_READ_MAX_KB'> },
  ref: MessageRef,
  listed: readonly AgentMail.Attachment[] | undefined,
  signal?: AbortSignal,
): Promise<DraftAttachment[]> {
  const maxBytes = deps.config.ATTACHMENT_READ_MAX_KB * 1024;
  let reads = 0;
  const out: DraftAttachment[] = [];
  for (const attachment of listed ?? []) {
    const base: DraftAttachment = {
      id: attachment.attachmentId,
      filename: attachment.filename ?? null,
      contentType: attachment.contentType ?? null,
      size: attachment.size,
      disposition: attachment.contentDisposition ?? null,
      text: null,
      unread: null,
    };
    const kind = kindOf(attachment);
    const unread = (why: string) => out.push({ ...base, unread: why });
    if (kind === 'image') unread('an image: images are not read');
    else if (kind === 'other' || !deps.config.ATTACHMENT_READERS.includes(kind)) unread('no reader for this type');
    else if (reads >= MAX_ATTACHMENTS_READ) unread(`more than ${MAX_ATTACHMENTS_READ} attachments to read`);
    else if (kind === 'pdf' && attachment.size > maxBytes)
      unread(`a PDF larger than ATTACHMENT_READ_MAX_KB=${deps.config.ATTACHMENT_READ_MAX_KB}`);
    else {
      reads += 1;
      const bytes = await download(deps.agentmail, ref, attachment.attachmentId, maxBytes, signal);
      if (bytes === null) unread('could not be downloaded');
      else {
        const text = kind === 'pdf' ? await pdfText(bytes) : textOf(bytes);
        if (text === null || text.trim() === '')
          unread(kind === 'pdf' ? 'a PDF without a text layer (a scan?) or not a valid PDF' : 'empty');
        else out.push({ ...base, text: clip(text, kind === 'text' && attachment.size > maxBytes) });
      }
    }
  }
  return out;
}

/** The first `maxBytes` of the attachment, or null when AgentMail has no such file or the CDN refuses it. */
async function download(
  agentmail: AttachmentSource,
  ref: MessageRef,
  attachmentId: string,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<Buffer | null> {
  let url: string;
  try {
    url = (await agentmail.inboxes.messages.getAttachment(ref.inboxId, ref.messageId, attachmentId)).downloadUrl;
  } catch (error) {
    if (error instanceof AgentMail.NotFoundError) return null;
    throw providerFailure(error, `reading attachment ${attachmentId} of message ${ref.messageId}`);
  }
  const deadline = AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS);
  try {
    const response = await fetch(url, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline });
    if (!response.ok || !response.body) return null;
    const chunks: Buffer[] = [];
    let total = 0;
    const reader = response.body.getReader();
    while (total < maxBytes) {
      const { done, value } = (await reader.read()) as { done: boolean; value?: Uint8Array };
      if (done || value === undefined) break;
      chunks.push(Buffer.from(value));
      total += value.length;
    }
    // The rest of a huge file is not wanted: stop the transfer instead of draining it.
    await reader.cancel().catch(() => undefined);
    return Buffer.concat(chunks).subarray(0, maxBytes);
  } catch (error) {
    if (signal?.aborted) throw error; // the activity was cancelled: Temporal's to handle
    return null;
  }
}

// eslint-disable-next-line no-control-regex -- removing control characters is the point.
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g;

function textOf(bytes: Buffer): string {
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes).replace(CONTROL, '');
}

async function pdfText(bytes: Buffer): Promise<string | null> {
  try {
    // verbosity 0: pdf.js would print its warnings about a broken file to the worker's stdout.
    const document = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
    try {
      const { text } = await extractText(document, { mergePages: true });
      return text.replace(CONTROL, '');
    } finally {
      await document.destroy();
    }
  } catch {
    return null;
  }
}

function clip(text: string, cutAtDownload: boolean): string {
  const trimmed = text.trim();
  if (trimmed.length > MAX_ATTACHMENT_TEXT_CHARACTERS)
    return `${trimmed.slice(0, MAX_ATTACHMENT_TEXT_CHARACTERS)}\n[… attachment shortened]`;
  return cutAtDownload ? `${trimmed}\n[… attachment shortened]` : trimmed;
}

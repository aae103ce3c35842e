import { randomUUID } from 'node:crypto';
import type { VirtualClock } from './clock';
import { ApiError } from './errors';
import type { AttachmentRaw } from './wire';

/**
 * Attachments as AgentMail keeps them: a message lists each one's metadata (attachment_id,
 * filename, content_type, size, content_disposition, content_id), never its bytes; GET
 * /v0/inboxes/:inbox/messages/:message/attachments/:id answers the same metadata with a signed
 * `download_url` and its `expires_at` (AgentMail's is a CDN URL valid for an hour, fetched without
 * the API key). The sandbox serves that URL itself, under /_sandbox/downloads/, and refuses it once
 * its (virtual) clock has passed the expiry, as a CDN answers an expired signature: 403.
 */

/** AgentMail's signed download URLs last an hour ("Get a 1-hour signed download URL"). */
export const DOWNLOAD_URL_TTL_MS = 60 * 60 * 1000;

export interface NewAttachment {
  filename?: string | undefined;
  content_type?: string | undefined;
  content_disposition?: 'inline' | 'attachment' | undefined;
  content_id?: string | undefined;
  bytes: Buffer;
}

interface Stored {
  raw: AttachmentRaw;
  bytes: Buffer;
}

export class AttachmentStore {
  private readonly byId = new Map<string, Stored>();
  private readonly downloads = new Map<string, { attachmentId: string; expiresAt: number }>();

  constructor(private readonly clock: VirtualClock) {}

  /** Stores the bytes and returns what the message lists. */
  add(input: NewAttachment): AttachmentRaw {
    const raw: AttachmentRaw = {
      attachment_id: `att_${randomUUID()}`,
      size: input.bytes.length,
      ...(input.filename !== undefined ? { filename: input.filename } : {}),
      ...(input.content_type !== undefined ? { content_type: input.content_type } : {}),
      ...(input.content_disposition !== undefined ? { content_disposition: input.content_disposition } : {}),
      ...(input.content_id !== undefined ? { content_id: input.content_id } : {}),
    };
    this.byId.set(raw.attachment_id, { raw, bytes: input.bytes });
    return raw;
  }

  /** The metadata with a fresh signed URL (on `origin`, the address the caller reached us at). */
  signed(listed: readonly AttachmentRaw[] | undefined, attachmentId: string, origin: string) {
    const stored = this.byId.get(attachmentId);
    if (!stored || !(listed ?? []).some((a) => a.attachment_id === attachmentId)) throw ApiError.notFound('Attachment');
    const token = randomUUID();
    const expiresAt = this.clock.nowMs() + DOWNLOAD_URL_TTL_MS;
    this.downloads.set(token, { attachmentId, expiresAt });
    return {
      ...stored.raw,
      download_url: `${origin}/_sandbox/downloads/${token}`,
      expires_at: new Date(expiresAt).toISOString(),
    };
  }

  /** The bytes behind a signed URL; null when the token is unknown or expired (a CDN's 403). */
  download(token: string): { bytes: Buffer; contentType: string; filename: string | undefined } | null {
    const grant = this.downloads.get(token);
    if (!grant || grant.expiresAt <= this.clock.nowMs()) return null;
    const stored = this.byId.get(grant.attachmentId);
    if (!stored) return null;
    return {
      bytes: stored.bytes,
      contentType: stored.raw.content_type ?? 'application/octet-stream',
      filename: stored.raw.filename,
    };
  }

  reset(): void {
    this.byId.clear();
    this.downloads.clear();
  }
}

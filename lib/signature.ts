import type { ActivityConfig } from './config';

/**
 * The signature every reply ends with (REPLY_INBOX_SIGNATURES for the inbox, else REPLY_SIGNATURE):
 * appended to the text that passed the text rule, when a draft or a reviewer's edit is stored, so
 * the stored text is the sent text and the desk's draft and diff show it. Never the model's to
 * write: a model's own sign-off stays, and the configured signature follows it.
 */

export type SignatureConfig = Pick<ActivityConfig, 'REPLY_SIGNATURE' | 'REPLY_INBOX_SIGNATURES'>;

export function signatureFor(config: SignatureConfig, inboxId: string): string | null {
  return config.REPLY_INBOX_SIGNATURES[inboxId.toLowerCase()] ?? config.REPLY_SIGNATURE ?? null;
}

/**
 * The text with the signature once: a text already ending with it (a reviewer who kept it in
 * their edit, a stored draft signed before) is left as it is, so a retry or an edit never signs twice.
 */
export function withSignature(text: string, signature: string | null): string {
  const body = text.trimEnd();
  if (signature === null || signature === '') return body;
  if (body.endsWith(signature)) return body;
  return `${body}\n\n${signature}`;
}

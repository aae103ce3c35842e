import { createHash } from 'node:crypto';
import type { MessageRef } from '../contract';

/** Hashing lives apart from contract/keys.ts because workflow code may not import node:crypto. */

export const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** JSON with object keys sorted, so the same request always hashes the same. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      );
    }
    return v;
  });
}

export const requestHash = (request: unknown): string => sha256Hex(canonicalJson(request));

/**
 * The logical job's identity: one workflow per (inbox, message). One email sent to three of
 * our inboxes is three jobs. Hashed because workflow IDs are shown unencrypted in the Web UI;
 * the JSON array keeps the two parts unambiguous ("a/b"+"c" vs "a"+"b/c").
 */
export function inboundWorkflowId(ref: MessageRef): string {
  return `inbound-message-${sha256Hex(JSON.stringify([ref.inboxId, ref.messageId])).slice(0, 40)}`;
}

/**
 * The key AgentMail sees: derived from our own operation key, never from anything a caller
 * sent us, and hashed so it fits the header's limits whatever the message id looks like.
 */
export const IDEMPOTENCY_KEY_PREFIX = 'replyonce-';
export const providerIdempotencyKey = (operationKey: string): string =>
  `${IDEMPOTENCY_KEY_PREFIX}${sha256Hex(operationKey)}`;

/** Recipients are stored only as hashes: the per-sender budget needs equality, not the address. */
export const addressHash = (address: string): string => sha256Hex(address.trim().toLowerCase());

/** A thread's key (inbox + thread, hashed): its row in `thread_turns` (activities/turns/turn-table.ts). */
export const threadKeyOf = (inboxId: string, threadId: string): string =>
  sha256Hex(JSON.stringify([inboxId, threadId])).slice(0, 40);

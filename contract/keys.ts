import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * Operation keys: one per business effect, stable across retries, restarts and replays.
 * Derived in the workflow (which passes each key to the activity that runs it), so this module
 * stays deterministic and free of Node built-ins: its hash is @noble/hashes' pure-JS sha256.
 * A key is versioned only when the *intended* action changes (an approver edits the text:
 * v2); a retry, a timeout or a restart never makes a new key.
 */

export const OperationKind = {
  decision: 'decision',
  draft: 'draft',
  ticket: 'ticket',
  /** A human's approval or rejection of the drafted reply. */
  review: 'review',
  /** The draft created at AgentMail for a reviewer to see (its client_id derives from this key). */
  providerDraft: 'provider-draft',
  reply: 'reply',
  /** The thread's one ticket (conversations): keyed by inbox + thread, so two first messages racing make one. */
  threadTicket: 'thread-ticket',
  /** Our sent reply, as a public comment on the thread's ticket. */
  ticketReply: 'ticket-reply',
  /** Why a message was not answered, as an internal note on the thread's ticket. */
  ticketNote: 'ticket-note',
  /** A notification to reviewers that a reply waits (…/notify-waiting/v1) or was escalated (…/notify-escalated/v1). */
  notify: 'notify',
  /** The word back to the customer when a person must answer (HANDOFF_ACKNOWLEDGMENT). */
  acknowledgment: 'acknowledgment',
} as const;
export type OperationKind = (typeof OperationKind)[keyof typeof OperationKind];

export interface MessageRef {
  inboxId: string;
  messageId: string;
}

/**
 * The longest inbox or message id kept as is in a key, in code points (Postgres's char_length).
 * Two parts at this length, a kind and a version stay far inside `operations.operation_key`'s
 * CHECK (≤ 1000 characters) and inside a btree entry (≤ 2704 bytes) even at 4 bytes a character.
 */
export const MAX_KEY_PART = 200;
/** What a long part keeps readable in front of its hash. */
const LONG_PART_PREFIX = 64;
/** Marks a hashed part. A raw part never contains it (see keyPart), so no raw id can pose as a hashed one. */
const HASHED = '…#';

const sha256Hex = (text: string): string => bytesToHex(sha256(utf8ToBytes(text)));

/**
 * An id as it appears in a key: itself when short (every key written before long ids were
 * hashed stays the same), else `<first 64 code points>…#<sha256 hex of the whole id>`. An id
 * that contains `…` is hashed too, whatever its length, so the two forms cannot collide.
 */
export function keyPart(id: string): string {
  const codePoints = [...id];
  if (codePoints.length <= MAX_KEY_PART && !id.includes('…')) return id;
  return `${codePoints.slice(0, LONG_PART_PREFIX).join('')}${HASHED}${sha256Hex(id)}`;
}

/**
 * `<inbox>/<message>/<kind>/v<version>`, as in DESIGN.md's key table, with long ids hashed
 * (keyPart). `kind` is one of the workflow's OperationKind values, or a new effect's own
 * (examples/refund.ts).
 */
export function operationKey(ref: MessageRef, kind: OperationKind | (string & {}), version = 1): string {
  if (!/^[a-z][a-z0-9-]{0,49}$/.test(kind))
    throw new RangeError(
      `operation kind must be 1-50 lower-case letters, digits or dashes, got ${JSON.stringify(kind)}`,
    );
  if (!Number.isInteger(version) || version < 1)
    throw new RangeError(`operation key version must be a positive integer, got ${version}`);
  return `${keyPart(ref.inboxId)}/${keyPart(ref.messageId)}/${kind}/v${version}`;
}

export const decisionKey = (ref: MessageRef) => operationKey(ref, OperationKind.decision);
export const draftKey = (ref: MessageRef, version = 1) => operationKey(ref, OperationKind.draft, version);
export const reviewKey = (ref: MessageRef) => operationKey(ref, OperationKind.review);
export const providerDraftKey = (ref: MessageRef, version = 1) =>
  operationKey(ref, OperationKind.providerDraft, version);
/** The message's entry on its thread's ticket: the ticket opened with it, or a comment carrying it. */
export const ticketKey = (ref: MessageRef) => operationKey(ref, OperationKind.ticket);
export const ticketReplyKey = (ref: MessageRef) => operationKey(ref, OperationKind.ticketReply);
export const ticketNoteKey = (ref: MessageRef) => operationKey(ref, OperationKind.ticketNote);

/**
 * The thread's ticket: `<inbox>/thread/<thread>/thread-ticket/v1`. Thread ids are AgentMail's
 * (UUIDs), message ids are Message-IDs in angle brackets, so no message key takes this shape.
 */
export const threadTicketKey = (inboxId: string, threadId: string) =>
  `${keyPart(inboxId)}/thread/${keyPart(threadId)}/${OperationKind.threadTicket}/v1`;
export const replyKey = (ref: MessageRef, version = 1) => operationKey(ref, OperationKind.reply, version);
/** One key per notification, so a retry or a replay never tells reviewers twice. */
export const notifyKey = (ref: MessageRef, event: 'waiting' | 'escalated') => operationKey(ref, `notify-${event}`);
/** The internal note a reviewer's rejection leaves on the thread's ticket (the message's other note may say it was held). */
export const rejectionNoteKey = (ref: MessageRef) => operationKey(ref, 'rejection-note');
/** The word back when a person must answer (HANDOFF_ACKNOWLEDGMENT): one per burst, under its holder's ref. */
export const acknowledgmentKey = (ref: MessageRef) => operationKey(ref, 'acknowledgment');

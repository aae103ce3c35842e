/**
 * Operation keys: one per business effect, stable across retries, restarts and replays.
 * Pure string functions (no hashing) so workflow code can derive them deterministically.
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
} as const;
export type OperationKind = (typeof OperationKind)[keyof typeof OperationKind];

export interface MessageRef {
  inboxId: string;
  messageId: string;
}

/**
 * `<inbox>/<message>/<kind>/v<version>`, as in DESIGN.md's key table. `kind` is one of the
 * workflow's OperationKind values, or a new effect's own (activities/examples/refund.ts).
 */
export function operationKey(ref: MessageRef, kind: OperationKind | (string & {}), version = 1): string {
  if (!/^[a-z][a-z0-9-]{0,49}$/.test(kind))
    throw new RangeError(
      `operation kind must be 1-50 lower-case letters, digits or dashes, got ${JSON.stringify(kind)}`,
    );
  if (!Number.isInteger(version) || version < 1)
    throw new RangeError(`operation key version must be a positive integer, got ${version}`);
  return `${ref.inboxId}/${ref.messageId}/${kind}/v${version}`;
}

export const decisionKey = (ref: MessageRef) => operationKey(ref, OperationKind.decision);
export const draftKey = (ref: MessageRef, version = 1) => operationKey(ref, OperationKind.draft, version);
export const reviewKey = (ref: MessageRef) => operationKey(ref, OperationKind.review);
export const providerDraftKey = (ref: MessageRef, version = 1) =>
  operationKey(ref, OperationKind.providerDraft, version);
export const ticketKey = (ref: MessageRef) => operationKey(ref, OperationKind.ticket);
export const replyKey = (ref: MessageRef, version = 1) => operationKey(ref, OperationKind.reply, version);

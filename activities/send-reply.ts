import { ApplicationFailure } from '@temporalio/activity';
import { AgentMail, AgentMailError, type AgentMailClient } from 'agentmail';
import { providerIdempotencyKey } from '../lib/hashing';
import * as metrics from '../lib/metrics';
import type { MessageRef } from '../lib/keys';
import { FailureType } from '../workflows/shared';
import type { StoredDraft } from './draft-reply';
import { emailAddress, fetchMessage, fetchThread } from './mail';
import { runOperation, type OwnedAttempt } from './operation-store/run-operation';
import type { OperationStore } from './operation-store/store';
import { recipientOf } from './recipients';

export interface SendInput extends MessageRef {
  draftKey: string;
  replyKey: string;
}

export interface SentReply {
  messageId: string;
  threadId: string;
  /** True when found in the thread after the provider's key may have expired, not sent by this attempt. */
  reconciled: boolean;
}

export interface SendDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  leaseMs: number;
  /** Age of the first attempt past which an unknown outcome is reconciled from the thread first. */
  reconcileAfterMs: number;
}

/** Our replies say they are automatic (RFC 3834), so well-behaved robots do not answer them. */
export const REPLY_HEADERS = { 'Auto-Submitted': 'auto-replied' } as const;

/**
 * Sends the stored draft as a reply, at most once per reply key. The request is resolved
 * entirely from the inbound message and the stored draft (never from model output), hashed,
 * and sent with an Idempotency-Key derived from the reply key, so a retry after a lost
 * response gets the original message back instead of a second email.
 */
export async function sendReply(deps: SendDeps, input: SendInput): Promise<SentReply & { replayed: boolean }> {
  const draft = await storedDraft(deps.store, input.draftKey);
  const inbound = await fetchMessage(deps.agentmail, input);
  const request: AgentMail.ReplyToMessageRequest = {
    to: [recipientOf(inbound, input)],
    text: draft.text,
    headers: { ...REPLY_HEADERS },
  };
  const resolved = { inboxId: input.inboxId, inReplyTo: input.messageId, ...request };
  return sendOnce(deps, input, inbound.threadId, resolved, () => deliver(deps.agentmail, input, request));
}

export interface DraftSendInput extends SendInput {
  /** The AgentMail draft a reviewer approved; it holds the text stored under `draftKey`. */
  draftId: string;
}

/**
 * Sends an approved AgentMail draft (`drafts.send`), at most once per reply key, with the
 * same Idempotency-Key rule and provider-outcome handling as a direct reply.
 */
export async function sendApprovedDraft(
  deps: SendDeps,
  input: DraftSendInput,
): Promise<SentReply & { replayed: boolean }> {
  const draft = await storedDraft(deps.store, input.draftKey);
  const inbound = await fetchMessage(deps.agentmail, input);
  const resolved = {
    inboxId: input.inboxId,
    inReplyTo: input.messageId,
    draftId: input.draftId,
    to: [recipientOf(inbound, input)],
    text: draft.text,
  };
  return sendOnce(deps, input, inbound.threadId, resolved, async () => {
    try {
      const sent = await deps.agentmail.inboxes.drafts.send(
        input.inboxId,
        input.draftId,
        {},
        { idempotencyKey: providerIdempotencyKey(input.replyKey) },
      );
      return { messageId: sent.messageId, threadId: sent.threadId, reconciled: false };
    } catch (error) {
      throw classifySendError(error, input.replyKey);
    }
  });
}

/**
 * The send's operation: claim the reply key, reconcile when the provider key may be gone, send.
 * The reply budget was reserved by the decision (activities/reply-budget.ts), not counted here.
 */
async function sendOnce(
  deps: SendDeps,
  input: SendInput,
  threadId: string,
  resolvedRequest: unknown,
  send: () => Promise<SentReply>,
): Promise<SentReply & { replayed: boolean }> {
  const outcome = await runOperation<SentReply>(
    deps.store,
    { key: input.replyKey, kind: 'reply', request: resolvedRequest, leaseMs: deps.leaseMs },
    async (attempt) => {
      const earlier = await reconcileIfKeyMayHaveExpired(deps, input, threadId, attempt);
      return earlier ?? (await send());
    },
  ).catch((error: unknown) => {
    if (
      error instanceof ApplicationFailure &&
      (error.type === FailureType.ReplyConflict || error.type === FailureType.OperationConflict)
    ) {
      metrics.sends.inc({ outcome: 'conflict' });
    }
    throw error;
  });
  metrics.sends.inc({ outcome: outcome.replayed ? 'replayed' : outcome.result.reconciled ? 'reconciled' : 'sent' });
  return { ...outcome.result, replayed: outcome.replayed };
}

export async function storedDraft(store: OperationStore, draftKey: string): Promise<StoredDraft> {
  const row = await store.get(draftKey);
  if (row?.status !== 'complete') {
    throw ApplicationFailure.create({
      type: FailureType.DraftMissing,
      message: `no stored draft under ${draftKey}; the draft must be stored before any send`,
      nonRetryable: true,
    });
  }
  return row.result as StoredDraft;
}

async function deliver(
  client: AgentMailClient,
  input: SendInput,
  request: AgentMail.ReplyToMessageRequest,
): Promise<SentReply> {
  try {
    const sent = await client.inboxes.messages.reply(input.inboxId, input.messageId, request, {
      idempotencyKey: providerIdempotencyKey(input.replyKey),
    });
    return { messageId: sent.messageId, threadId: sent.threadId, reconciled: false };
  } catch (error) {
    throw classifySendError(error, input.replyKey);
  }
}

/**
 * DESIGN.md's provider-outcome table. Only answers that prove our own bug are final; every
 * unknown outcome (timeout, 5xx, reset) is retried with the same key, never a new one.
 */
export function classifySendError(error: unknown, replyKey: string): unknown {
  if (error instanceof AgentMail.ConflictError) {
    const detail = conflictDetail(error);
    if (/progress|in.flight|processing|concurrent/i.test(detail)) {
      return ApplicationFailure.create({
        type: 'ReplyInProgress',
        message: `AgentMail is still processing the first request for ${replyKey}: ${detail}`,
        nonRetryable: false,
      });
    }
    return ApplicationFailure.create({
      type: FailureType.ReplyConflict,
      message: `AgentMail refused ${replyKey}: the key was used with a different request (${detail})`,
      nonRetryable: true,
    });
  }
  if (error instanceof AgentMail.ValidationError || (error instanceof AgentMailError && error.statusCode === 400)) {
    return ApplicationFailure.create({
      type: FailureType.ReplyRejected,
      message: `AgentMail rejected the reply for ${replyKey} as invalid (400)`,
      nonRetryable: true,
    });
  }
  return ApplicationFailure.create({
    type: 'ReplyOutcomeUnknown',
    message: `sending ${replyKey} ended without an answer we can trust (${error instanceof Error ? error.message : String(error)}); retrying with the same key`,
    nonRetryable: false,
    cause: error instanceof Error ? error : undefined,
  });
}

function conflictDetail(error: AgentMailError): string {
  const body = error.body as { message?: unknown; name?: unknown } | undefined;
  return typeof body?.message === 'string' ? body.message : error.message;
}

/**
 * AgentMail forgets an Idempotency-Key 24 h after the send completed. A send still unresolved
 * that long after its first attempt looks in the thread for our reply to this message before
 * sending again: found → record it; not found → the send below goes out once.
 */
async function reconcileIfKeyMayHaveExpired(
  deps: SendDeps,
  input: SendInput,
  threadId: string,
  attempt: OwnedAttempt,
): Promise<SentReply | null> {
  if (!attempt.resumed || attempt.firstAttemptAgeMs < deps.reconcileAfterMs) return null;
  const thread = await fetchThread(deps.agentmail, input.inboxId, threadId);
  const ours = thread.messages.find(
    (m) =>
      m.inReplyTo === input.messageId &&
      m.labels.includes('sent') &&
      emailAddress(m.from) === input.inboxId.toLowerCase(),
  );
  return ours ? { messageId: ours.messageId, threadId: ours.threadId, reconciled: true } : null;
}

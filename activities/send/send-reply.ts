import { ApplicationFailure } from '@temporalio/activity';
import { AgentMail, AgentMailError, type AgentMailClient } from 'agentmail';
import { providerIdempotencyKey } from '../../lib/hashing';
import * as metrics from '../../lib/metrics';
import {
  FailureType,
  type MessageRef,
  OperationKind,
  type OperationReport,
  RetryableFailureType,
} from '../../contract';
import { providerErrorText } from '../../lib/provider-errors';
import { storedDraft } from '../draft/draft-store';
import { emailAddress, fetchMessage, fetchThread } from '../agentmail/reads';
import { replayCompleted, runOperation, type OwnedAttempt } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import { providerFailure } from '../agentmail/failures';
import { recipientOf, recipientPolicy } from '../agentmail/recipients';
import type { ActivityConfig } from '../../lib/config';

export interface SendInput extends MessageRef {
  /** The stored text to send (…/draft/vN). */
  draftKey: string;
  /** This send's operation key (…/reply/vN); AgentMail's Idempotency-Key derives from it. */
  replyKey: string;
  /**
   * A label the sent message carries, so reconciliation tells it apart from the reply to the same
   * message (the acknowledgment's, ACKNOWLEDGMENT_LABEL); absent for the reply itself.
   */
  label?: typeof ACKNOWLEDGMENT_LABEL;
}

/** What an acknowledgment carries at AgentMail (send-acknowledgment.ts): a reply's reconciliation never takes one for itself. */
export const ACKNOWLEDGMENT_LABEL = 'acknowledgment';

export type SendOutcome = SentReply & { replayed: boolean; operation: OperationReport };

export interface SentReply {
  messageId: string;
  threadId: string;
  /** True when found in the thread after the provider's key may have expired, not sent by this attempt. */
  reconciled: boolean;
}

export interface SendDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_LEASE_MS' | 'SEND_RECONCILE_AFTER_MS' | 'REPLYONCE_REPLY_TO_DOMAINS'>;
}

/** Our replies say they are automatic (RFC 3834), so well-behaved robots do not answer them. */
export const REPLY_HEADERS = { 'Auto-Submitted': 'auto-replied' } as const;

/**
 * Sends the stored draft as a reply, at most once per reply key. The request is resolved
 * entirely from the inbound message and the stored draft (never from model output), hashed,
 * and sent with an Idempotency-Key derived from the reply key, so a retry after a lost
 * response gets the original message back instead of a second email.
 *
 * An approved reply goes out the same way: our stored text of the approved version, to the
 * recipient the rule gives — never AgentMail's draft (`drafts.send`), which anyone with the
 * console or the API key can change after the approval (another `to`, a `bcc`, other text).
 */
export async function sendReply(deps: SendDeps, input: SendInput): Promise<SendOutcome> {
  const sentBefore = await replayedSend(deps, input);
  if (sentBefore) return sentBefore;
  const draft = await storedDraft(deps.store, input.draftKey);
  const inbound = await fetchMessage(deps.agentmail, input);
  const request: AgentMail.ReplyToMessageRequest = {
    to: [recipientOf(inbound, input, recipientPolicy(deps.config))],
    text: draft.text,
    headers: { ...REPLY_HEADERS },
    ...(input.label ? { labels: [input.label] } : {}),
  };
  const resolved = { inboxId: input.inboxId, inReplyTo: input.messageId, ...request };
  return sendOnce(deps, input, inbound.threadId, resolved, () => deliver(deps.agentmail, input, request));
}

/** A reply sent before: replayed from the store before anything is read from AgentMail. */
async function replayedSend(deps: SendDeps, input: SendInput): Promise<SendOutcome | undefined> {
  const done = await replayCompleted<SentReply>(deps.store, input.replyKey, OperationKind.reply);
  if (!done) return undefined;
  metrics.sends.inc({ outcome: 'replayed' });
  return { ...done.result, replayed: true, operation: done.operation };
}

/**
 * The send's operation: claim the reply key, reconcile when the provider key may be gone, send.
 * The reply budget was reserved by the decision (activities/decide/reply-budget.ts), not counted here.
 */
async function sendOnce(
  deps: SendDeps,
  input: SendInput,
  threadId: string,
  resolvedRequest: unknown,
  send: () => Promise<SentReply>,
): Promise<SendOutcome> {
  const outcome = await runOperation<SentReply>(
    deps.store,
    {
      key: input.replyKey,
      kind: OperationKind.reply,
      request: resolvedRequest,
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
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
  return { ...outcome.result, replayed: outcome.replayed, operation: outcome.operation };
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
 * unknown outcome (timeout, 5xx, reset) is retried with the same key, never a new one. The
 * failures say what AgentMail answered (status, error name, its code), never its body:
 * a body can quote the reply's text and recipients (lib/provider-errors.ts).
 */
export function classifySendError(error: unknown, replyKey: string): unknown {
  const answer = providerErrorText(error);
  if (error instanceof AgentMail.ConflictError) {
    if (stillInFlight(error)) {
      return ApplicationFailure.create({
        type: RetryableFailureType.ReplyInProgress,
        message: `AgentMail is still processing the first request for ${replyKey}: ${answer}`,
        nonRetryable: false,
      });
    }
    return ApplicationFailure.create({
      type: FailureType.ReplyConflict,
      message: `AgentMail refused ${replyKey}: the key was used with a different request (${answer})`,
      nonRetryable: true,
    });
  }
  if (error instanceof AgentMail.ValidationError || (error instanceof AgentMailError && error.statusCode === 400)) {
    return ApplicationFailure.create({
      type: FailureType.ReplyRejected,
      message: `AgentMail rejected the reply for ${replyKey} as invalid: ${answer}`,
      nonRetryable: true,
    });
  }
  const failure = providerFailure(error, `sending ${replyKey}`);
  if (failure.nonRetryable || failure.type === 'AgentMailUnauthorized') return failure;
  return ApplicationFailure.create({
    type: RetryableFailureType.ReplyOutcomeUnknown,
    message: `sending ${replyKey} ended without an answer we can trust (${answer}); retrying with the same key`,
    nonRetryable: false,
  });
}

/** A 409 for a key whose first request is still being processed, as opposed to a key reused with another request. */
function stillInFlight(error: AgentMailError): boolean {
  const body = error.body as { message?: unknown; code?: unknown } | undefined;
  const said = [body?.code, body?.message].filter((v): v is string => typeof v === 'string').join(' ');
  return /progress|in.flight|processing|concurrent/i.test(said || error.message);
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
  if (!attempt.resumed || attempt.firstAttemptAgeMs < deps.config.SEND_RECONCILE_AFTER_MS) return null;
  const thread = await fetchThread(deps.agentmail, input.inboxId, threadId);
  const ours = thread.messages.find(
    (m) =>
      m.inReplyTo === input.messageId &&
      m.labels.includes('sent') &&
      m.labels.includes(ACKNOWLEDGMENT_LABEL) === (input.label === ACKNOWLEDGMENT_LABEL) &&
      emailAddress(m.from) === input.inboxId.toLowerCase(),
  );
  return ours ? { messageId: ours.messageId, threadId: ours.threadId, reconciled: true } : null;
}

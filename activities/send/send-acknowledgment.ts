import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, operationKey, type OperationReport } from '../../contract';
import { detectLanguage } from '../../knowledge/language';
import { acknowledgmentText } from '../../lib/acknowledgment-text';
import { answerBy, businessHoursFor } from '../../lib/business-hours';
import type { ACKNOWLEDGMENT_OCCASIONS, ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { signatureFor, withSignature } from '../../lib/signature';
import { fetchMessage } from '../agentmail/reads';
import { recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import { releaseReply, reserveReply } from '../decide/reply-budget';
import type { StoredDraft } from '../draft/draft-store';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import { ACKNOWLEDGMENT_LABEL, sendReply } from './send-reply';

/**
 * A word back when a person must answer (issue 37, HANDOFF_ACKNOWLEDGMENT): "a person will answer
 * by <when>", in the customer's language, exactly once per key. Its text is stored first under its
 * own key (…/acknowledgment-text/v1: the "by when" is decided once, so a retry sends the same
 * words), then sent like a reply (send-reply.ts) under `key` with AgentMail's Idempotency-Key
 * derived from it: a send whose answer is lost is retried with the same key, and AgentMail
 * answers the first email instead of sending a second. It counts against the reply budget and the
 * inbox's ceiling (a reservation under `key`); past either, nothing is sent.
 *
 * The workflow calls it only for a message the decision chose to answer (so never for robots,
 * lists, bounces or our own mail) and only when a person must answer; this activity checks the
 * configuration itself, so a call for an inbox or an occasion that is not configured sends nothing.
 */

export type AcknowledgmentOccasion = (typeof ACKNOWLEDGMENT_OCCASIONS)[number];

export interface AcknowledgmentInput extends MessageRef {
  /** The acknowledgment's operation key (contract's acknowledgmentKey), derived by the workflow. */
  key: string;
  occasion: AcknowledgmentOccasion;
  /** The message's stored draft, when there is one: its detected language is used. */
  draftKey?: string;
}

export type AcknowledgmentOutcome =
  | { sent: true; messageId: string; replayed: boolean; operation: OperationReport }
  | {
      sent: false;
      reason: 'not-configured' | 'no-valid-recipient' | 'sender-budget-exceeded' | 'inbox-ceiling-reached';
    };

export interface AcknowledgmentDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  config: Pick<
    ActivityConfig,
    | 'OPERATION_LEASE_MS'
    | 'SEND_RECONCILE_AFTER_MS'
    | 'REPLYONCE_REPLY_TO_DOMAINS'
    | 'HANDOFF_ACKNOWLEDGMENT'
    | 'BUSINESS_HOURS'
    | 'REPLY_SIGNATURE'
    | 'REPLY_INBOX_SIGNATURES'
    | 'REPLY_BUDGET_PER_SENDER'
    | 'REPLY_CEILING_PER_INBOX_PER_HOUR'
  >;
}

export const acknowledgmentTextKey = (ref: MessageRef) => operationKey(ref, 'acknowledgment-text');

export async function sendAcknowledgment(
  deps: AcknowledgmentDeps,
  input: AcknowledgmentInput,
): Promise<AcknowledgmentOutcome> {
  const configured =
    deps.config.HANDOFF_ACKNOWLEDGMENT[input.inboxId.toLowerCase()] ?? deps.config.HANDOFF_ACKNOWLEDGMENT['*'] ?? [];
  if (!configured.includes(input.occasion)) return { sent: false, reason: 'not-configured' };
  const message = await fetchMessage(deps.agentmail, input);
  const sender = senderOf(message);
  const recipient = replyRecipient(message, recipientPolicy(deps.config));
  if (sender === null || recipient === null) return { sent: false, reason: 'no-valid-recipient' };

  const reservation = await reserveReply(
    deps.db,
    { replyKey: input.key, inboxId: input.inboxId, sender: sender.address, recipient: recipient.address },
    { perAddress: deps.config.REPLY_BUDGET_PER_SENDER, perInboxPerHour: deps.config.REPLY_CEILING_PER_INBOX_PER_HOUR },
  );
  if (!reservation.granted) return { sent: false, reason: reservation.reason };

  const textKey = acknowledgmentTextKey(input);
  await runOperation<StoredDraft>(
    deps.store,
    {
      key: textKey,
      kind: OperationKind.draft,
      request: { ...refOf(input), occasion: input.occasion },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => {
      const drafted = input.draftKey
        ? await deps.store.completed<StoredDraft>(input.draftKey, OperationKind.draft)
        : undefined;
      const language =
        drafted?.language?.detected ?? detectLanguage(message.extractedText ?? message.text ?? '') ?? null;
      const hours = businessHoursFor(deps.config.BUSINESS_HOURS, input.inboxId);
      const by = hours ? answerBy(new Date(), hours) : null;
      const text = withSignature(acknowledgmentText(language, by), signatureFor(deps.config, input.inboxId));
      return { text, drafter: 'acknowledgment' };
    },
  );
  try {
    const sent = await sendReply(deps, {
      ...refOf(input),
      draftKey: textKey,
      replyKey: input.key,
      label: ACKNOWLEDGMENT_LABEL,
    });
    return { sent: true, messageId: sent.messageId, replayed: sent.replayed, operation: sent.operation };
  } catch (error) {
    // A send that failed for good (a rejected request) is not counted; a retryable one keeps its reservation.
    if (error instanceof Error && 'nonRetryable' in error && error.nonRetryable === true)
      await releaseReply(deps.db, input.key);
    throw error;
  }
}

const refOf = (input: MessageRef): MessageRef => ({ inboxId: input.inboxId, messageId: input.messageId });

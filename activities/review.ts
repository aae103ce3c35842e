import { ApplicationFailure } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { providerIdempotencyKey } from '../lib/hashing';
import { draftKey, providerDraftKey, reviewKey, type MessageRef } from '../lib/keys';
import { FailureType, type ReviewInput } from '../workflows/shared';
import { validDraft, type StoredDraft } from './draft-reply';
import { fetchMessage } from './mail';
import { runOperation } from './operation-store/run-operation';
import type { OperationStore } from './operation-store/store';
import { recipientOf } from './recipients';
import { storedDraft } from './send-reply';

/**
 * The human-approval path. A reviewer's verdict is stored like any effect, under
 * `…/review/v1`, so a replay of the workflow (a retry, a run after Temporal's retention) sees
 * the first verdict instead of asking again; the AgentMail draft the reviewer sees is created
 * once per draft version, with a client_id derived from its operation key.
 */

export interface ReviewDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  leaseMs: number;
}

export interface StoredReview {
  verdict: 'approve' | 'reject';
  reviewer: string | null;
  /** The reviewer's replacement text, when they edited the draft. */
  text: string | null;
}

/** The verdict stored for this message, if a reviewer already gave one. */
export async function recallReview(deps: ReviewDeps, ref: MessageRef): Promise<StoredReview | null> {
  const row = await deps.store.get(reviewKey(ref));
  return row?.status === 'complete' ? (row.result as StoredReview) : null;
}

/** Stores the verdict; the first one wins, a later one replays it. */
export async function recordReview(
  deps: ReviewDeps,
  input: MessageRef & { review: ReviewInput },
): Promise<StoredReview & { edited: boolean }> {
  const outcome = await runOperation<StoredReview>(
    deps.store,
    {
      key: reviewKey(input),
      kind: 'review',
      request: { inboxId: input.inboxId, messageId: input.messageId },
      leaseMs: deps.leaseMs,
    },
    async () => ({
      verdict: input.review.verdict,
      reviewer: input.review.reviewer ?? null,
      text:
        input.review.verdict === 'approve' && input.review.text !== undefined
          ? validDraft(input.review.text, 'reviewer')
          : null,
    }),
  );
  return { ...outcome.result, edited: outcome.result.text !== null };
}

/** Stores the reviewer's edited text as the next draft version (…/draft/v2), before any send. */
export async function reviseDraft(
  deps: ReviewDeps,
  input: MessageRef & { version: number },
): Promise<{ draftKey: string }> {
  const review = await recallReview(deps, input);
  if (review?.text == null) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidReview,
      message: `no edited text stored under ${reviewKey(input)}`,
      nonRetryable: true,
    });
  }
  const key = draftKey(input, input.version);
  await runOperation<StoredDraft>(
    deps.store,
    {
      key,
      kind: 'draft',
      request: { inboxId: input.inboxId, messageId: input.messageId, source: reviewKey(input) },
      leaseMs: deps.leaseMs,
    },
    async () => ({ text: review.text as string, drafter: `reviewer${review.reviewer ? `:${review.reviewer}` : ''}` }),
  );
  return { draftKey: key };
}

/**
 * Creates the AgentMail draft a reviewer looks at. AgentMail's drafts take no custom headers,
 * so an approved reply goes out without `Auto-Submitted` — correct, since a person approved it.
 */
export async function createProviderDraft(
  deps: ReviewDeps,
  input: MessageRef & { version: number },
): Promise<{ draftId: string; draftKey: string }> {
  const textKey = draftKey(input, input.version);
  const draft = await storedDraft(deps.store, textKey);
  const inbound = await fetchMessage(deps.agentmail, input);
  const key = providerDraftKey(input, input.version);
  const request = {
    to: [recipientOf(inbound, input)],
    subject: /^re:/i.test(inbound.subject ?? '') ? inbound.subject : `Re: ${inbound.subject ?? ''}`,
    text: draft.text,
    inReplyTo: input.messageId,
    clientId: providerIdempotencyKey(key),
  };
  const outcome = await runOperation<{ draftId: string }>(
    deps.store,
    { key, kind: 'provider-draft', request: { inboxId: input.inboxId, ...request }, leaseMs: deps.leaseMs },
    async () => ({ draftId: (await deps.agentmail.inboxes.drafts.create(input.inboxId, request)).draftId }),
  );
  return { draftId: outcome.result.draftId, draftKey: textKey };
}

import { ApplicationFailure } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { providerIdempotencyKey } from '../../lib/hashing';
import { FailureType, type MessageRef, OperationKind, type OperationReport, type ReviewInput } from '../../contract';
import { storeDraftVersion, storedDraft, validDraft } from './draft-store';
import { fetchMessage } from '../agentmail/reads';
import { replayCompleted, runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import { providerFailure } from '../agentmail/failures';
import { recipientOf } from '../agentmail/recipients';
import type { ActivityConfig } from '../../lib/config';

/**
 * The human-approval path. A reviewer's verdict is stored like any effect, under
 * `…/review/v1`, so a replay of the workflow (a retry, a run after Temporal's retention) sees
 * the first verdict instead of asking again; the AgentMail draft the reviewer sees is created
 * once per draft version, with a client_id derived from its operation key. Every key comes
 * from the workflow.
 */

export interface ReviewDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_LEASE_MS'>;
}

export interface StoredReview {
  verdict: 'approve' | 'reject';
  reviewer: string | null;
  /** The reviewer's replacement text, when they edited the draft. */
  text: string | null;
}

export type ReviewOutcome = StoredReview & { operation: OperationReport };

/** The verdict stored under the review key, if a reviewer already gave one (a replay of it). */
export async function recallReview(deps: ReviewDeps, input: { key: string }): Promise<ReviewOutcome | null> {
  const review = await deps.store.completed<StoredReview>(input.key, OperationKind.review);
  return review === undefined
    ? null
    : { ...review, operation: { key: input.key, kind: OperationKind.review, state: 'replayed' } };
}

/** Stores the verdict; the first one wins, a later one replays it. */
export async function recordReview(
  deps: ReviewDeps,
  input: MessageRef & { key: string; review: ReviewInput },
): Promise<ReviewOutcome> {
  const outcome = await runOperation<StoredReview>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.review,
      request: { inboxId: input.inboxId, messageId: input.messageId },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => ({
      verdict: input.review.verdict,
      reviewer: input.review.reviewer ?? null,
      // The same rule the workflow's Update validator applied: an edit it accepted passes here.
      text:
        input.review.verdict === 'approve' && input.review.text !== undefined
          ? validDraft(input.review.text, 'the reviewer')
          : null,
    }),
  );
  return { ...outcome.result, operation: outcome.operation };
}

/** Stores the reviewer's edited text (kept under the review key) as the next draft version, before any send. */
export async function reviseDraft(
  deps: ReviewDeps,
  input: MessageRef & { key: string; reviewKey: string },
): Promise<{ characters: number; operation: OperationReport }> {
  const review = await deps.store.completed<StoredReview>(input.reviewKey, OperationKind.review);
  if (review?.text == null) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidReview,
      message: `no edited text stored under ${input.reviewKey}`,
      nonRetryable: true,
    });
  }
  return storeDraftVersion(deps, {
    key: input.key,
    inboxId: input.inboxId,
    messageId: input.messageId,
    source: input.reviewKey,
    text: review.text,
    author: `reviewer${review.reviewer ? `:${review.reviewer}` : ''}`,
  });
}

export interface ProviderDraftInput extends MessageRef {
  /** This AgentMail draft's operation key (…/provider-draft/vN); its client_id derives from it. */
  key: string;
  /** The draft text's key (…/draft/vN): what the reviewer sees. */
  draftKey: string;
}

/**
 * Creates the AgentMail draft a reviewer looks at. AgentMail's drafts take no custom headers,
 * so an approved reply goes out without `Auto-Submitted` — correct, since a person approved it.
 */
export async function createProviderDraft(
  deps: ReviewDeps,
  input: ProviderDraftInput,
): Promise<{ draftId: string; operation: OperationReport }> {
  // Created before: replayed from the store, before anything is read from AgentMail.
  const before = await replayCompleted<{ draftId: string }>(deps.store, input.key, OperationKind.providerDraft);
  if (before) return { draftId: before.result.draftId, operation: before.operation };
  const draft = await storedDraft(deps.store, input.draftKey);
  const inbound = await fetchMessage(deps.agentmail, input);
  const request = {
    to: [recipientOf(inbound, input)],
    subject: /^re:/i.test(inbound.subject ?? '') ? inbound.subject : `Re: ${inbound.subject ?? ''}`,
    text: draft.text,
    inReplyTo: input.messageId,
    clientId: providerIdempotencyKey(input.key),
  };
  const outcome = await runOperation<{ draftId: string }>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.providerDraft,
      request: { inboxId: input.inboxId, ...request },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => {
      try {
        return { draftId: (await deps.agentmail.inboxes.drafts.create(input.inboxId, request)).draftId };
      } catch (error) {
        throw providerFailure(error, `creating the AgentMail draft for ${input.key}`);
      }
    },
  );
  return { draftId: outcome.result.draftId, operation: outcome.operation };
}

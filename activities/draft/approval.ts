import { ApplicationFailure } from '@temporalio/activity';
import { AgentMailError, type AgentMailClient } from 'agentmail';
import { inboundWorkflowId } from '../../lib/hashing';
import type { Db } from '../../lib/db';
import { recordReviewAudit } from '../../review/audit';
import { FailureType, type MessageRef, OperationKind, type OperationReport, type ReviewInput } from '../../contract';
import { storeDraftVersion, storedDraft, validDraft } from './draft-store';
import { replayCompleted, runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import { providerFailure } from '../agentmail/failures';
import type { ActivityConfig } from '../../lib/config';

/**
 * The human-approval path. A reviewer's verdict is stored like any effect, under
 * `…/review/v1`, so a replay of the workflow (a retry, a run after Temporal's retention) sees
 * the verdict instead of asking again, and written to the audit (review/audit.ts: who, which
 * revision, when). What goes out is our stored, approved text (activities/send/send-reply.ts).
 *
 * Nothing sendable waits at AgentMail: a draft there carries the real recipient, and one press of
 * *Send* in AgentMail's console, then an approval in the desk, would send two emails (or a
 * rejection would record `rejected` for an email that went out). People read a waiting draft in
 * the review desk and on the ticket. The workflow's `provider-draft` step stays (its shape is
 * recorded in history); it now records that no AgentMail draft was made. Every key comes from the workflow.
 */

export interface ReviewDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_LEASE_MS' | 'REPLYONCE_REPLY_TO_DOMAINS'>;
}

export interface StoredReview {
  verdict: 'approve' | 'reject';
  /** The draft revision judged. Absent on verdicts stored before revisions existed. */
  revision?: number;
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

/** Stores the verdict the workflow accepted, and its audit row; a retry replays it. */
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
    async () => {
      const review: StoredReview = {
        verdict: input.review.verdict,
        revision: input.review.revision,
        reviewer: input.review.reviewer,
        // The same rule the workflow's Update validator applied: an edit it accepted passes here.
        text:
          input.review.verdict === 'approve' && input.review.text !== undefined
            ? validDraft(input.review.text, 'the reviewer')
            : null,
      };
      // Before the verdict is stored: a crash between the two writes the same row again (one per message).
      await recordReviewAudit(deps.db, {
        workflowId: inboundWorkflowId(input),
        inboxId: input.inboxId,
        messageId: input.messageId,
        verdict: review.verdict,
        revision: input.review.revision,
        edited: review.text !== null,
        reviewerId: input.review.reviewer,
      });
      return review;
    },
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

/** What the `provider-draft` step records now: no draft was made at AgentMail (the desk and the ticket show it). */
export const NO_PROVIDER_DRAFT = 'none: read it in the review desk and on the ticket';

/**
 * The `provider-draft` step of a waiting reply: it makes nothing at AgentMail (see above) and records
 * so under its key, so a replay finds it done. A draft an earlier build made there stays recorded
 * and is deleted when its verdict stands (deleteProviderDraft).
 */
export async function createProviderDraft(
  deps: ReviewDeps,
  input: ProviderDraftInput,
): Promise<{ draftId: string; operation: OperationReport }> {
  // Recorded before (by this build, or a draft an earlier build made): replayed from the store.
  const before = await replayCompleted<{ draftId: string }>(deps.store, input.key, OperationKind.providerDraft);
  if (before) return { draftId: before.result.draftId, operation: before.operation };
  // The draft the reviewer will judge must exist before the wait starts.
  await storedDraft(deps.store, input.draftKey);
  const outcome = await runOperation<{ draftId: string }>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.providerDraft,
      request: { inboxId: input.inboxId, messageId: input.messageId, draftKey: input.draftKey, atAgentMail: false },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => ({ draftId: NO_PROVIDER_DRAFT }),
  );
  return { draftId: outcome.result.draftId, operation: outcome.operation };
}

/**
 * Deletes an AgentMail draft an earlier build made for a reviewer, once a verdict stands (rejected,
 * or approved and about to go out as our stored text): a draft left at AgentMail stays sendable
 * from its console. Idempotent: a draft already gone (deleted before, or never created) is not an error.
 */
export async function deleteProviderDraft(
  deps: ReviewDeps,
  input: { inboxId: string; providerDraftKey: string },
): Promise<{ deleted: boolean }> {
  const created = await deps.store.completed<{ draftId: string }>(input.providerDraftKey, OperationKind.providerDraft);
  if (created === undefined || created.draftId === NO_PROVIDER_DRAFT) return { deleted: false };
  try {
    await deps.agentmail.inboxes.drafts.delete(input.inboxId, created.draftId);
    return { deleted: true };
  } catch (error) {
    if (error instanceof AgentMailError && error.statusCode === 404) return { deleted: false };
    throw providerFailure(error, `deleting the AgentMail draft of ${input.providerDraftKey}`);
  }
}

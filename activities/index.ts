import type { AgentMailClient } from 'agentmail';
import type { ActivityConfig } from '../lib/config';
import type { Db } from '../lib/db';
import type { MessageRef, ReviewInput, TurnHandBack } from '../contract';
import { withFailureBoundary } from './failures/boundary';
import { decideReply, releaseReplyBudget, type DecideInput } from './decide/decide-reply';
import { draftReply, type DraftInput } from './draft/draft-reply';
import type { Drafter } from './draft/drafting/drafter';
import { labelMessage } from './send/label-message';
import {
  commentDraftNote,
  commentReply,
  type DraftNoteInput,
  openTicket,
  type ReplyCommentInput,
  type TicketInput,
} from './ticket/open-ticket';
import { askTurn, type AskTurnInput, releaseTurn } from './turns/ask-turn';
import { OperationStore } from './operation-store/store';
import { OwnAddresses } from './decide/own-addresses';
import { pruneExpiredRecords } from './upkeep/retention';
import { syncKnowledge } from './upkeep/knowledge-sync';
import { createEmbedder } from '../knowledge';
import { catchUpInboxForWatchdog, checkWebhooks, reenableWebhook } from './upkeep/webhook-watchdog';
import {
  createProviderDraft,
  deleteProviderDraft,
  recallReview,
  recordReview,
  reviseDraft,
  type ProviderDraftInput,
} from './draft/approval';
import { sendReply, type SendInput } from './send/send-reply';
import { type AcknowledgmentInput, sendAcknowledgment } from './send/send-acknowledgment';
import type { TicketProvider } from './ticket/ticket-provider';
import { notifyReviewers, type NotifyInput } from './notify/notify-reviewers';

export interface ActivityDeps {
  db: Db;
  agentmail: AgentMailClient;
  drafter: Drafter;
  tickets: TicketProvider;
  /** The worker's validated configuration (lib/config.ts `activityConfig` for tests and tools). */
  config: ActivityConfig;
  /** How often the cached list of the organisation's inboxes is refreshed (default five minutes). */
  ownInboxesRefreshMs?: number;
}

/**
 * The activities, closed over their dependencies (the worker builds these once). Each effect
 * takes its operation key from the workflow (contract/keys.ts, derived there once) and reports its
 * operation back; every failure leaves through one boundary (failures/boundary.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const store = new OperationStore(deps.db);
  // Optional (KNOWLEDGE_EMBEDDINGS_*): null means full-text search alone.
  const embedder = createEmbedder(deps.config);
  const common = { ...deps, store, embedder };
  const decide = {
    ...common,
    own: new OwnAddresses(deps.agentmail, deps.config.REPLYONCE_OWN_ADDRESSES, deps.ownInboxesRefreshMs),
  };
  return withFailureBoundary({
    decideReply: (input: DecideInput) => decideReply(decide, input),
    releaseReplyBudget: (input: { budgetKey: string }) => releaseReplyBudget(deps, input),
    draftReply: (input: DraftInput) => draftReply(common, input),
    openTicket: (input: TicketInput) => openTicket(common, input),
    commentReply: (input: ReplyCommentInput) => commentReply(common, input),
    commentDraftNote: (input: DraftNoteInput) => commentDraftNote(common, input),
    askTurn: (input: AskTurnInput & { again?: boolean }) => askTurn(common, input),
    releaseTurn: (input: TurnHandBack) => releaseTurn(common, input),
    /**
     * After a reply went out: the thread's turn back, the message labelled, the reply commented on
     * the ticket. One local activity, so the tail of a message's run costs Temporal one marker and
     * no extra workflow task (each part is idempotent: a retry repeats it harmlessly).
     */
    finishReply: async (input: ReplyCommentInput & TurnHandBack) => {
      await releaseTurn(common, input);
      await labelMessage(deps.agentmail, input);
      return commentReply(common, input);
    },
    sendReply: (input: SendInput) => sendReply(common, input),
    /** A word back when a person must answer (HANDOFF_ACKNOWLEDGMENT); the workflow's call is the integrator's. */
    sendAcknowledgment: (input: AcknowledgmentInput) => sendAcknowledgment(common, input),
    labelMessage: (ref: MessageRef) => labelMessage(deps.agentmail, ref),
    recallReview: (input: { key: string }) => recallReview(common, input),
    recordReview: (input: MessageRef & { key: string; review: ReviewInput }) => recordReview(common, input),
    reviseDraft: (input: MessageRef & { key: string; reviewKey: string }) => reviseDraft(common, input),
    createProviderDraft: (input: ProviderDraftInput) => createProviderDraft(common, input),
    deleteProviderDraft: (input: { inboxId: string; providerDraftKey: string }) => deleteProviderDraft(common, input),
    checkWebhooks: () => checkWebhooks(deps),
    reenableWebhook: (input: { webhookId: string }) => reenableWebhook(deps, input),
    catchUpInbox: (input: { inboxId: string }) => catchUpInboxForWatchdog(deps, input),
    notifyReviewers: (input: NotifyInput) => notifyReviewers(common, input),
    pruneExpiredRecords: (input: { batchSize?: number } = {}) => pruneExpiredRecords(deps, input),
    syncKnowledge: () => syncKnowledge({ ...deps, embedder }),
  });
}

export type Activities = ReturnType<typeof createActivities>;

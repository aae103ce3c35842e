import type { AgentMailClient } from 'agentmail';
import type { Db } from '../lib/db';
import type { MessageRef } from '../lib/keys';
import { withFailureBoundary } from './activity-boundary';
import { decideReply } from './decide-reply';
import { draftReply, type DraftInput } from './draft-reply';
import type { Drafter } from './drafting/drafter';
import { labelMessage } from './label-message';
import { openTicket, type TicketInput } from './open-ticket';
import { OperationStore } from './operation-store/store';
import { pruneExpiredRecords } from './retention';
import { catchUpInboxForWatchdog, checkWebhooks, reenableWebhook } from './webhook-watchdog';
import { createProviderDraft, recallReview, recordReview, reviseDraft, type ProviderDraftInput } from './review';
import { sendApprovedDraft, sendReply, type DraftSendInput, type SendInput } from './send-reply';
import type { ReviewInput } from '../workflows/shared';
import type { TicketProvider } from './tickets/ticket-provider';

export interface ActivityDeps {
  db: Db;
  agentmail: AgentMailClient;
  drafter: Drafter;
  tickets: TicketProvider;
  ownAddresses: readonly string[];
  replyBudgetPerSender: number;
  ticketForSkipped: boolean;
  approvalInboxes: readonly string[];
  approvalTimeoutMs: number;
  reconcileAfterMs: number;
  /**
   * How long a claim stays exclusive without renewal. Renewed every third of it while the
   * effect runs; after a crash the next attempt waits at most this long to take over.
   */
  leaseMs: number;
  /** OPERATION_RETENTION_DAYS (default 90): retention's horizon for operations, and the replay horizon. */
  operationRetentionDays?: number;
  /** WATCHDOG_REENABLE (default false): the watchdog turns a disabled webhook back on and catches up. */
  webhookReenable?: boolean;
  /** WATCHDOG_WEBHOOK_IDS (default: every webhook that receives message.received). */
  watchdogWebhookIds?: readonly string[];
}

/**
 * The activities, closed over their dependencies (the worker builds these once). Each effect
 * takes its operation key from the workflow (lib/keys.ts, derived there once) and reports its
 * operation back; every failure leaves through one boundary (activity-boundary.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const store = new OperationStore(deps.db);
  const common = { ...deps, store };
  const operationRetentionDays = deps.operationRetentionDays ?? 90;
  const watchdog = {
    ...deps,
    reenable: deps.webhookReenable ?? false,
    webhookIds: deps.watchdogWebhookIds ?? [],
    operationRetentionDays,
  };
  return withFailureBoundary({
    decideReply: (input: MessageRef & { key: string }) => decideReply(common, input),
    draftReply: (input: DraftInput) => draftReply(common, input),
    openTicket: (input: TicketInput) => openTicket(common, input),
    sendReply: (input: SendInput) => sendReply(common, input),
    labelMessage: (ref: MessageRef) => labelMessage(deps.agentmail, ref),
    recallReview: (input: { key: string }) => recallReview(common, input),
    recordReview: (input: MessageRef & { key: string; review: ReviewInput }) => recordReview(common, input),
    reviseDraft: (input: MessageRef & { key: string; reviewKey: string }) => reviseDraft(common, input),
    createProviderDraft: (input: ProviderDraftInput) => createProviderDraft(common, input),
    sendApprovedDraft: (input: DraftSendInput) => sendApprovedDraft(common, input),
    checkWebhooks: () => checkWebhooks(watchdog),
    reenableWebhook: (input: { webhookId: string }) => reenableWebhook(watchdog, input),
    catchUpInbox: (input: { inboxId: string }) => catchUpInboxForWatchdog(watchdog, input),
    pruneExpiredRecords: (input: { batchSize?: number } = {}) =>
      pruneExpiredRecords({ db: deps.db, operationRetentionDays }, input),
  });
}

export type Activities = ReturnType<typeof createActivities>;

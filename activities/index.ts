import type { AgentMailClient } from 'agentmail';
import { DEFAULT_REPLY_CEILING_PER_INBOX_PER_HOUR, DEFAULT_REPLY_MAX_AGE_MS } from '../lib/config';
import type { Db } from '../lib/db';
import type { MessageRef, ReviewInput } from '../contract';
import { withFailureBoundary } from './failures/boundary';
import { decideReply, releaseReplyBudget, type DecideInput } from './decide/decide-reply';
import { draftReply, type DraftInput } from './draft/draft-reply';
import type { Drafter } from './draft/drafting/drafter';
import { labelMessage } from './send/label-message';
import { openTicket, type TicketInput } from './ticket/open-ticket';
import { OperationStore } from './operation-store/store';
import { OwnAddresses } from './decide/own-addresses';
import { pruneExpiredRecords } from './upkeep/retention';
import { catchUpInboxForWatchdog, checkWebhooks, reenableWebhook } from './upkeep/webhook-watchdog';
import {
  createProviderDraft,
  recallReview,
  recordReview,
  reviseDraft,
  type ProviderDraftInput,
} from './draft/approval';
import { sendApprovedDraft, sendReply, type DraftSendInput, type SendInput } from './send/send-reply';
import type { TicketProvider } from './ticket/ticket-provider';

export interface ActivityDeps {
  db: Db;
  agentmail: AgentMailClient;
  drafter: Drafter;
  tickets: TicketProvider;
  /** REPLYONCE_OWN_ADDRESSES: ours besides the organisation's inboxes (which are listed from AgentMail). */
  ownAddresses: readonly string[];
  /** How often the cached list of the organisation's inboxes is refreshed (default five minutes). */
  ownInboxesRefreshMs?: number;
  /** REPLYONCE_INBOXES (lower case); empty or unset: every inbox of the organisation. */
  allowedInboxes?: readonly string[];
  replyBudgetPerSender: number;
  /** REPLY_CEILING_PER_INBOX_PER_HOUR (default 200). */
  replyCeilingPerInboxPerHour?: number;
  /** REPLY_MAX_AGE in ms (default 7 days). */
  replyMaxAgeMs?: number;
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
 * takes its operation key from the workflow (contract/keys.ts, derived there once) and reports its
 * operation back; every failure leaves through one boundary (activity-boundary.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const store = new OperationStore(deps.db);
  const common = { ...deps, store };
  const decide = {
    ...common,
    own: new OwnAddresses(deps.agentmail, deps.ownAddresses, deps.ownInboxesRefreshMs),
    allowedInboxes: deps.allowedInboxes ?? [],
    replyCeilingPerInboxPerHour: deps.replyCeilingPerInboxPerHour ?? DEFAULT_REPLY_CEILING_PER_INBOX_PER_HOUR,
    replyMaxAgeMs: deps.replyMaxAgeMs ?? DEFAULT_REPLY_MAX_AGE_MS,
  };
  const operationRetentionDays = deps.operationRetentionDays ?? 90;
  const watchdog = {
    ...deps,
    reenable: deps.webhookReenable ?? false,
    webhookIds: deps.watchdogWebhookIds ?? [],
    operationRetentionDays,
  };
  return withFailureBoundary({
    decideReply: (input: DecideInput) => decideReply(decide, input),
    releaseReplyBudget: (input: { budgetKey: string }) => releaseReplyBudget(deps, input),
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

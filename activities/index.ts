import type { AgentMailClient } from 'agentmail';
import type { Db } from '../lib/db';
import type { MessageRef } from '../lib/keys';
import { decideReply } from './decide-reply';
import { draftReply } from './draft-reply';
import type { Drafter } from './drafting/drafter';
import { labelMessage } from './label-message';
import { openTicket, type TicketInput } from './open-ticket';
import { OperationStore } from './operation-store/store';
import { createProviderDraft, recallReview, recordReview, reviseDraft } from './review';
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
}

/** The activities, closed over their dependencies (the worker builds these once). */
export function createActivities(deps: ActivityDeps) {
  const store = new OperationStore(deps.db);
  const common = { ...deps, store };
  return {
    decideReply: (ref: MessageRef) => decideReply(common, ref),
    draftReply: (ref: MessageRef) => draftReply(common, ref),
    openTicket: (input: TicketInput) => openTicket(common, input),
    sendReply: (input: SendInput) => sendReply(common, input),
    labelMessage: (ref: MessageRef) => labelMessage(deps.agentmail, ref),
    recallReview: (ref: MessageRef) => recallReview(common, ref),
    recordReview: (input: MessageRef & { review: ReviewInput }) => recordReview(common, input),
    reviseDraft: (input: MessageRef & { version: number }) => reviseDraft(common, input),
    createProviderDraft: (input: MessageRef & { version: number }) => createProviderDraft(common, input),
    sendApprovedDraft: (input: DraftSendInput) => sendApprovedDraft(common, input),
  };
}

export type Activities = ReturnType<typeof createActivities>;

import type { AgentMailClient } from 'agentmail';
import type { Db } from '../lib/db';
import { addressHash } from '../lib/hashing';
import type { MessageRef } from '../lib/keys';
import type { OperationReport } from '../workflows/shared';
import { emailAddress, fetchMessage } from './mail';
import { runOperation } from './operation-store/run-operation';
import type { OperationStore } from './operation-store/store';
import { replyRecipients, skipReason, type SkipReason } from './reply-policy';

export interface ReplyDecision {
  reply: boolean;
  reason: SkipReason | null;
  threadId: string;
  /** Whether the message gets a ticket (always when answered; when skipped, as configured). */
  ticket: boolean;
  /** Whether a person must approve the reply first, and how long to wait before escalating. */
  approval: { required: boolean; timeoutMs: number };
}

export interface DecideDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  ownAddresses: readonly string[];
  replyBudgetPerSender: number;
  ticketForSkipped: boolean;
  /** Inboxes (lower case) whose replies need a person's approval; `*` means every inbox. */
  approvalInboxes: readonly string[];
  approvalTimeoutMs: number;
  leaseMs: number;
}

/**
 * Decides whether a reply is owed, once, and records it: a replay sees the same decision
 * even if the sender's budget has filled up since (the decision is an operation too).
 */
export async function decideReply(
  deps: DecideDeps,
  ref: MessageRef & { key: string },
): Promise<ReplyDecision & { operation: OperationReport }> {
  const outcome = await runOperation<ReplyDecision>(
    deps.store,
    {
      key: ref.key,
      kind: 'decision',
      request: { inboxId: ref.inboxId, messageId: ref.messageId },
      leaseMs: deps.leaseMs,
    },
    async () => {
      const message = await fetchMessage(deps.agentmail, ref);
      const ownAddresses = [ref.inboxId.toLowerCase(), ...deps.ownAddresses];
      const reason = skipReason(message, { ownAddresses }) ?? (await budgetReason(deps, replyRecipients(message)));
      const approvalRequired =
        deps.approvalInboxes.includes('*') || deps.approvalInboxes.includes(ref.inboxId.toLowerCase());
      return {
        reply: reason === null,
        reason,
        threadId: message.threadId,
        ticket: reason === null || deps.ticketForSkipped,
        approval: { required: approvalRequired, timeoutMs: deps.approvalTimeoutMs },
      };
    },
  );
  return { ...outcome.result, operation: outcome.operation };
}

async function budgetReason(deps: DecideDeps, recipients: string[]): Promise<SkipReason | null> {
  const hashes = recipients.map((r) => addressHash(emailAddress(r)));
  const counted = await deps.db.query<{ replies: string }>(
    `SELECT count(*) AS replies FROM sent_replies
      WHERE recipient_hash = ANY($1) AND sent_at > now() - interval '24 hours'`,
    [hashes],
  );
  return Number(counted.rows[0]?.replies ?? 0) >= deps.replyBudgetPerSender ? 'sender-budget-exceeded' : null;
}

import { Context, log } from '@temporalio/activity';
import type { AgentMail, AgentMailClient } from 'agentmail';
import type { Db } from '../../lib/db';
import { type MessageRef, OperationKind, type OperationReport, replyKey } from '../../contract';
import * as metrics from '../../lib/metrics';
import { fetchMessageInThread } from '../agentmail/reads';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { OwnAddresses } from './own-addresses';
import { recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import { isBlockedSender } from './blocked-senders';
import { releaseReply, reserveReply, retakeReply } from './reply-budget';
import { rethrowDatabaseRejection } from '../failures/database';
import { skipReason, TICKET_ALWAYS, TICKET_IF_ROBOTS_WANTED, TICKET_NEVER, type SkipReason } from './reply-policy';
import type { ActivityConfig } from '../../lib/config';

export interface ReplyDecision {
  reply: boolean;
  reason: SkipReason | null;
  threadId: string;
  /** Whether the message gets a ticket (always when answered; when skipped, as configured). */
  ticket: boolean;
  /**
   * A skipped message's ticket is one TICKET_FOR_SKIPPED asked for: bounded per inbox (counted on
   * the inbox's open ticket past TICKET_FOR_SKIPPED_PER_INBOX; activities/ticket/skipped-fold.ts).
   * Absent on decisions recorded before the rule.
   */
  foldTicket?: boolean;
  /** Whether a person must approve the reply first, and how long to wait before escalating. */
  approval: { required: boolean; timeoutMs: number };
  /**
   * When the customer gets a word back that a person will answer (HANDOFF_ACKNOWLEDGMENT for this
   * inbox): the workflow asks for one only then. Absent on decisions recorded before the setting:
   * the workflow asks, and the activity answers by the configuration.
   */
  acknowledgeOn?: string[];
}

export interface DecideDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  own: OwnAddresses;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<
    ActivityConfig,
    | 'APPROVAL_REQUIRED_INBOXES'
    | 'APPROVAL_TIMEOUT_MS'
    | 'HANDOFF_ACKNOWLEDGMENT'
    | 'OPERATION_LEASE_MS'
    | 'REPLYONCE_INBOXES'
    | 'REPLYONCE_REPLY_TO_DOMAINS'
    | 'REPLY_BUDGET_PER_SENDER'
    | 'REPLY_CEILING_PER_INBOX_PER_HOUR'
    | 'REPLY_MAX_AGE'
    | 'TICKET_FOR_SKIPPED'
    | 'TICKET_FOR_ROBOTS'
  >;
}

export interface DecideInput extends MessageRef {
  /** The decision's operation key. */
  key: string;
  /** The key the message's budget reservation is kept under (its first reply key). */
  budgetKey: string;
  /**
   * The message's thread as the ingress was told (the run's `ThreadId`), when it was: the message is
   * then read through its thread, a read the turn takes too (agentmail/reads.ts). A hint only: the
   * decision's `threadId` is the message's own.
   */
  threadHint?: string;
}

/** A decision as stored: which run made it, so a new run knows it is not its own. */
type StoredDecision = ReplyDecision & { runId?: string };

/**
 * Decides whether a reply is owed and records it: the same run's retries (and replays of its
 * history) see the same decision even if the sender's budget has filled up since (the decision
 * is an operation too). A NEW run of the message (a catch-up, an operator's rerun, the relay
 * after an outage) whose reply has not gone out decides again, as configured now — the age
 * (REPLY_MAX_AGE), APPROVAL_REQUIRED_INBOXES, REPLYONCE_INBOXES — under the same key; once a
 * reply may have gone out, the decision stands and the send replays. A reply owed is a reply
 * reserved: the budget's row is written in the same step (activities/decide/reply-budget.ts).
 */
export async function decideReply(
  deps: DecideDeps,
  ref: DecideInput,
): Promise<ReplyDecision & { operation: OperationReport }> {
  const runId = Context.current().info.workflowExecution?.runId ?? 'no-run';
  const redecided = await reopenForNewRun(deps, ref, runId);
  const outcome = await runOperation<StoredDecision>(
    deps.store,
    {
      key: ref.key,
      kind: 'decision',
      request: { inboxId: ref.inboxId, messageId: ref.messageId },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => {
      const message = await fetchMessageInThread(deps.agentmail, ref, ref.threadHint);
      const reason = await whyNotAnswer(deps, ref, message);
      const approvalRequired =
        deps.config.APPROVAL_REQUIRED_INBOXES.includes('*') ||
        deps.config.APPROVAL_REQUIRED_INBOXES.includes(ref.inboxId.toLowerCase());
      const optional =
        reason !== null &&
        !TICKET_ALWAYS.has(reason) &&
        deps.config.TICKET_FOR_SKIPPED &&
        !TICKET_NEVER.has(reason) &&
        (deps.config.TICKET_FOR_ROBOTS || !TICKET_IF_ROBOTS_WANTED.has(reason));
      const ticket = reason === null || TICKET_ALWAYS.has(reason) || optional;
      return {
        reply: reason === null,
        reason,
        threadId: message.threadId,
        ticket,
        foldTicket: optional,
        approval: { required: approvalRequired, timeoutMs: deps.config.APPROVAL_TIMEOUT_MS },
        acknowledgeOn: [
          ...(deps.config.HANDOFF_ACKNOWLEDGMENT[ref.inboxId.toLowerCase()] ??
            deps.config.HANDOFF_ACKNOWLEDGMENT['*'] ??
            []),
        ],
        runId,
      };
    },
  );
  // Decided again and no longer a reply (too old now, the inbox no longer served): the earlier
  // decision's reservation is given back.
  if (redecided && !outcome.result.reply) await releaseReply(deps.db, ref.budgetKey);
  if (outcome.replayed && outcome.result.reply) await retakeReply(deps.db, ref.budgetKey);
  if (!outcome.replayed) {
    const { reason } = outcome.result;
    metrics.decisions.inc({ outcome: reason ?? 'reply' });
    // Ids only (the activity's log context carries the workflow id); never the sender's address.
    if (reason !== null) log.info('not answering automatically', { reason, messageId: ref.messageId });
  }
  const { runId: _decidedBy, ...decision } = outcome.result;
  if (redecided) log.info('decided again for a new run', { reply: decision.reply, reason: decision.reason });
  return { ...decision, operation: outcome.operation };
}

/**
 * A decision recorded by another run (or before runs were recorded) whose reply has not gone out
 * (no reply operation complete or in flight, any version) is opened again for this run to make.
 * Returns whether it was.
 */
async function reopenForNewRun(deps: DecideDeps, ref: DecideInput, runId: string): Promise<boolean> {
  try {
    const stored = await deps.store.completed<StoredDecision>(ref.key, OperationKind.decision);
    if (stored === undefined || stored.runId === runId) return false;
    if (await deps.store.mayHaveHappened([ref.budgetKey, replyKey(ref, 1), replyKey(ref, 2)])) return false;
    return await deps.store.reopen(ref.key, OperationKind.decision);
  } catch (error) {
    return rethrowDatabaseRejection(error);
  }
}

/** The checks in order: whose inbox, who wrote, what the message says of itself, whom we would write to, the budget. */
async function whyNotAnswer(
  deps: DecideDeps,
  ref: DecideInput,
  message: AgentMail.Message,
): Promise<SkipReason | null> {
  if (deps.config.REPLYONCE_INBOXES.length > 0 && !deps.config.REPLYONCE_INBOXES.includes(ref.inboxId.toLowerCase()))
    return 'inbox-not-allowed';
  const sender = senderOf(message);
  if (sender !== null && (await deps.own.isOwn(sender.normalized, ref.inboxId))) return 'from-own-inbox';
  if (sender !== null && (await isBlockedSender(deps.db, sender.normalized))) return 'blocked-sender';
  const reason = skipReason(message, { now: Date.now(), maxAgeMs: deps.config.REPLY_MAX_AGE });
  if (reason !== null) return reason;

  const recipient = replyRecipient(message, recipientPolicy(deps.config));
  if (sender === null || recipient === null || (await deps.own.isOwn(recipient.normalized, ref.inboxId)))
    return 'no-valid-recipient';
  const reservation = await reserveReply(
    deps.db,
    { replyKey: ref.budgetKey, inboxId: ref.inboxId, sender: sender.normalized, recipient: recipient.normalized },
    { perAddress: deps.config.REPLY_BUDGET_PER_SENDER, perInboxPerHour: deps.config.REPLY_CEILING_PER_INBOX_PER_HOUR },
  );
  return reservation.granted ? null : reservation.reason;
}

/**
 * Gives the message's reservation back when its reply will not be sent (a reviewer rejected it,
 * or the run failed before the send started). Idempotent: releasing twice releases once.
 */
export async function releaseReplyBudget(
  deps: { db: Db },
  input: { budgetKey: string },
): Promise<{ released: boolean }> {
  return releaseReply(deps.db, input.budgetKey);
}

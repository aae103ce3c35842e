import { Context, log } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type HoldRule, type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { validDraft, type StoredDraft } from './draft-store';
import { draftHolds } from './draft-check';
import { mailboxOf } from '../agentmail/mailbox';
import { bareAddress, recipientPolicy, replyRecipient, senderOf } from '../agentmail/recipients';
import type { Drafter } from './drafting/drafter';
import { fetchMessage, fetchThread } from '../agentmail/reads';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { ActivityConfig } from '../../lib/config';

export interface DraftInput extends MessageRef {
  /** The draft's operation key (…/draft/v1), derived by the workflow. */
  key: string;
}

export interface DraftOutcome {
  characters: number;
  /** The rules the drafted text tripped (activities/draft/draft-check.ts): non-empty, a person must approve it. */
  holds: HoldRule[];
  operation: OperationReport;
}

export interface DraftDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  drafter: Drafter;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<
    ActivityConfig,
    'OPERATION_LEASE_MS' | 'DRAFT_ALLOWED_LINK_DOMAINS' | 'REPLYONCE_OWN_ADDRESSES' | 'REPLYONCE_REPLY_TO_DOMAINS'
  >;
}

/**
 * Drafts the reply once and stores the text under the draft key before any send, with the rules
 * it trips (draft-check.ts), so a replay holds what the first run held. Only the key, a length
 * and rule names go back to the workflow: drafted text stays out of Temporal's history.
 *
 * The model sees the conversation between this customer and us only: the thread's messages from
 * any other mailbox, and our replies to anyone else, are left out and only counted.
 */
export async function draftReply(deps: DraftDeps, input: DraftInput): Promise<DraftOutcome> {
  const { key, ...ref } = input;
  const outcome = await runOperation<StoredDraft & { holds?: HoldRule[] }>(
    deps.store,
    {
      key,
      kind: OperationKind.draft,
      request: { inboxId: ref.inboxId, messageId: ref.messageId },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => {
      const message = await fetchMessage(deps.agentmail, ref);
      const thread = await fetchThread(deps.agentmail, ref.inboxId, message.threadId);
      const customer = customerMailboxes(message, deps.config);
      const others = thread.messages.filter(
        (m) => m.messageId !== message.messageId && !betweenUsAndCustomer(m, customer),
      );
      const earlier = [...thread.messages]
        .filter((m) => m.messageId !== message.messageId && m.timestamp.getTime() <= message.timestamp.getTime())
        .filter((m) => betweenUsAndCustomer(m, customer))
        .sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime())
        .map((m) => ({
          direction: m.labels.includes('sent') ? ('outbound' as const) : ('inbound' as const),
          text: m.extractedText ?? m.text ?? '',
          timestamp: m.timestamp,
        }));
      // One line per drafter (model) call: operators and the crash tests count calls by it.
      log.info('drafting reply', { operationKey: key, drafter: deps.drafter.name });
      const text = await deps.drafter.draft(
        {
          inboxId: ref.inboxId,
          messageId: ref.messageId,
          subject: message.subject ?? '',
          text: message.extractedText ?? message.text ?? '',
          timestamp: message.timestamp,
          thread: earlier,
          othersLeftOut: others.length,
        },
        { signal: Context.current().cancellationSignal },
      );
      const valid = validDraft(text, deps.drafter.name);
      const holds = draftHolds(valid, {
        inboxId: ref.inboxId,
        allowedLinkDomains: deps.config.DRAFT_ALLOWED_LINK_DOMAINS,
        ownAddresses: deps.config.REPLYONCE_OWN_ADDRESSES,
        customer: [...customer],
        instructions: deps.drafter.instructionsFor?.(ref.inboxId) ?? null,
      });
      return { text: valid, drafter: deps.drafter.name, holds };
    },
  );
  return { characters: outcome.result.text.length, holds: outcome.result.holds ?? [], operation: outcome.operation };
}

/** This customer's mailboxes: the sender's and, when the rule follows Reply-To, its. */
function customerMailboxes(
  message: Parameters<typeof replyRecipient>[0],
  config: DraftDeps['config'],
): ReadonlySet<string> {
  const found = [senderOf(message), replyRecipient(message, recipientPolicy(config))];
  return new Set(found.flatMap((r) => (r === null ? [] : [r.normalized])));
}

/** Whether a thread message is between this customer and us: theirs, or our reply to them. */
function betweenUsAndCustomer(
  m: { from: string; to?: string[]; labels: string[] },
  customer: ReadonlySet<string>,
): boolean {
  const mailbox = (value: string) => {
    const bare = bareAddress(value);
    return bare === null ? null : mailboxOf(bare);
  };
  if (m.labels.includes('sent')) return (m.to ?? []).some((to) => customer.has(mailbox(to) ?? ''));
  const from = mailbox(m.from);
  return from !== null && customer.has(from);
}

import { Context, log } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { validDraft, type StoredDraft } from './draft-store';
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
  operation: OperationReport;
}

export interface DraftDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  drafter: Drafter;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_LEASE_MS'>;
}

/**
 * Drafts the reply once and stores the text under the draft key before any send. Only the
 * key and a length go back to the workflow: drafted text stays out of Temporal's history.
 */
export async function draftReply(deps: DraftDeps, input: DraftInput): Promise<DraftOutcome> {
  const { key, ...ref } = input;
  const outcome = await runOperation<StoredDraft>(
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
      // Everything we sent in the thread (a reply to the message before this one may be newer than
      // this message: it was written while this one waited for its turn), and the customer's
      // messages up to this one (later ones get their own turn).
      const earlier = [...thread.messages]
        .filter(
          (m) =>
            m.messageId !== message.messageId &&
            (m.labels.includes('sent') || m.timestamp.getTime() <= message.timestamp.getTime()),
        )
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
        },
        { signal: Context.current().cancellationSignal },
      );
      return { text: validDraft(text, deps.drafter.name), drafter: deps.drafter.name };
    },
  );
  return { characters: outcome.result.text.length, operation: outcome.operation };
}

import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { draftKey, type MessageRef } from '../lib/keys';
import { FailureType } from '../workflows/shared';
import { MAX_DRAFT_CHARACTERS, type Drafter } from './drafting/drafter';
import { fetchMessage, fetchThread } from './mail';
import { runOperation } from './operation-store/run-operation';
import type { OperationStore } from './operation-store/store';

export interface StoredDraft {
  text: string;
  drafter: string;
}

export interface DraftOutcome {
  draftKey: string;
  characters: number;
  replayed: boolean;
}

export interface DraftDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  drafter: Drafter;
  leaseMs: number;
}

/**
 * Drafts the reply once and stores the text under the draft key before any send. Only the
 * key and a length go back to the workflow: drafted text stays out of Temporal's history.
 */
export async function draftReply(deps: DraftDeps, ref: MessageRef): Promise<DraftOutcome> {
  const key = draftKey(ref);
  const outcome = await runOperation<StoredDraft>(
    deps.store,
    { key, kind: 'draft', request: { inboxId: ref.inboxId, messageId: ref.messageId }, leaseMs: deps.leaseMs },
    async () => {
      const message = await fetchMessage(deps.agentmail, ref);
      const thread = await fetchThread(deps.agentmail, ref.inboxId, message.threadId);
      const earlier = [...thread.messages]
        .filter((m) => m.messageId !== message.messageId && m.timestamp.getTime() <= message.timestamp.getTime())
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
  return { draftKey: key, characters: outcome.result.text.length, replayed: outcome.replayed };
}

/** Drafted text is checked before it is stored: non-empty plain text of a sane length. */
export function validDraft(text: string, drafter: string): string {
  const trimmed = text.trim();
  const problem =
    trimmed === ''
      ? 'is empty'
      : trimmed.length > MAX_DRAFT_CHARACTERS
        ? `is longer than ${MAX_DRAFT_CHARACTERS} characters`
        : /<\/?[a-z][\s\S]*?>/i.test(trimmed)
          ? 'contains HTML; replies are plain text'
          : null;
  if (problem) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidDraft,
      message: `the ${drafter} drafter's output ${problem}`,
      nonRetryable: true,
    });
  }
  return trimmed;
}

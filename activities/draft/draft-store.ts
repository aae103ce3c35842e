import { ApplicationFailure } from '@temporalio/activity';
import {
  draftProblem,
  FailureType,
  type HoldRule,
  normalizedDraft,
  OperationKind,
  type OperationReport,
} from '../../contract';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { ActivityConfig } from '../../lib/config';
import type { TextCut } from '../../knowledge/message-text';

/**
 * Drafts, the one module for them: the rule a reply's text must pass (contract/draft-text.ts, also
 * run by the workflow's review Update and the admin route), the text stored under a draft key
 * before any send, and its versions (v1 drafted, v2 an approver's edit). The draft activity
 * (draft-reply.ts), the review path (review.ts) and the send (send-reply.ts) all go through here.
 */

/** What a draft key's operation stores: the text sent, and who wrote it. */
export interface StoredDraft {
  text: string;
  /** The drafter's name (`offline`, `openai:gpt-4o-mini`, …) or `reviewer[:name]` for an edit. */
  drafter: string;
  /** The knowledge articles the reply cites (their ids), when the inbox has a knowledge base. */
  citations?: string[];
  /** The articles the drafter was given (ids, best first): what the ticket note lists. */
  considered?: string[];
  /** Set when the drafter did not know: the text is not sent without a person. */
  handoff?: null | { kind: 'model' | 'bad-citation' | 'no-citation'; reason: string };
  /** The draft rules the model's text tripped (activities/draft/draft-check.ts): a person approves it first. */
  holds?: HoldRule[];
  /** Set when only the start of the message was read (knowledge/message-text.ts): the ticket note says so. */
  textCut?: TextCut;
}

/** The text as it will be stored and sent, or a final `InvalidDraft` naming what is wrong with it. */
export function validDraft(text: string, author: string): string {
  const problem = draftProblem(text);
  if (problem !== null) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidDraft,
      message: `the reply text by ${author} ${problem}`,
      nonRetryable: true,
    });
  }
  return normalizedDraft(text);
}

/** The text stored under `draftKey`. Every send and every AgentMail draft reads it here, never elsewhere. */
export async function storedDraft(store: OperationStore, draftKey: string): Promise<StoredDraft> {
  const draft = await store.completed<StoredDraft>(draftKey, OperationKind.draft);
  if (draft === undefined) {
    throw ApplicationFailure.create({
      type: FailureType.DraftMissing,
      message: `no stored draft under ${draftKey}; the draft must be stored before any send`,
      nonRetryable: true,
    });
  }
  return draft;
}

export interface DraftVersionInput {
  /** The draft key of this version (…/draft/v2). */
  key: string;
  inboxId: string;
  messageId: string;
  /** Where the text comes from (the review key): part of the request, so another source is a conflict. */
  source: string;
  text: string;
  author: string;
}

/** Stores a new version of the draft (an approver's edit), validated by the same rule as the drafter's. */
export async function storeDraftVersion(
  deps: { store: OperationStore; config: Pick<ActivityConfig, 'OPERATION_LEASE_MS'> },
  input: DraftVersionInput,
): Promise<{ characters: number; operation: OperationReport }> {
  const outcome = await runOperation<StoredDraft>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.draft,
      request: { inboxId: input.inboxId, messageId: input.messageId, source: input.source },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    async () => ({ text: validDraft(input.text, input.author), drafter: input.author }),
  );
  return { characters: outcome.result.text.length, operation: outcome.operation };
}

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
import type { HandoffKind } from './drafting/answer';
import type { CitedArticle } from './citations';
import type { MailRecord } from './customer-mail';
import { signatureFor, type SignatureConfig, withSignature } from '../../lib/signature';

const signing = (config: Partial<SignatureConfig>): SignatureConfig => ({
  REPLY_SIGNATURE: config.REPLY_SIGNATURE,
  REPLY_INBOX_SIGNATURES: config.REPLY_INBOX_SIGNATURES ?? {},
});
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
  handoff?: null | { kind: HandoffKind; reason: string };
  /** The draft rules the model's text tripped (activities/draft/draft-check.ts): a person approves it first. */
  holds?: HoldRule[];
  /** The customer's language (ISO 639-1): detected (null: too short to tell) and replied in. */
  language?: MailRecord['language'];
  /** The message's attachments (AgentMail's ids, names, types, sizes; whether a reader read one): the ticket and the desk list them. */
  attachments?: MailRecord['attachments'];
  /** The cited articles as people see them (title, heading, a piece of text, link): the desk shows them. */
  cited?: CitedArticle[];
  /** Set when only the start of the message was read (knowledge/message-text.ts): the ticket note says so. */
  textCut?: TextCut;
  /**
   * The customer's earlier messages the draft was shown (ids): once its reply is sent, they are
   * answered, whenever their own webhooks come (activities/turns/ask-turn.ts).
   */
  read?: string[];
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

/**
 * Stores a new version of the draft (an approver's edit), validated by the same rule as the
 * drafter's, and signed like it (signature.ts: once, whether or not the edit kept the signature).
 * The signature settings are optional in the type because the review's deps name only what they
 * read themselves; the worker passes its whole configuration.
 */
export async function storeDraftVersion(
  deps: { store: OperationStore; config: Pick<ActivityConfig, 'OPERATION_LEASE_MS'> & Partial<SignatureConfig> },
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
    async () => ({
      text: withSignature(validDraft(input.text, input.author), signatureFor(signing(deps.config), input.inboxId)),
      drafter: input.author,
    }),
  );
  return { characters: outcome.result.text.length, operation: outcome.operation };
}

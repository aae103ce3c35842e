import type { DraftAttachment } from './attachments';
import type { TextCut } from '../../../knowledge/message-text';
import type { RelevanceVerdict } from '../../../knowledge/relevance-floor';

/**
 * The drafting provider interface. The workflow asks for one draft per message; the draft
 * activity stores the text before anything is sent, so a drafter is called once per message
 * however often the workflow is retried or replayed.
 *
 * Nothing in a request can choose where the reply goes: recipients, the reply reference and the
 * sending inbox come from the inbound message when the reply is sent (activities/send/send-reply.ts).
 */

export interface DraftRequest {
  /** Our receiving inbox: selects the inbox's instructions; never shown to the model. */
  inboxId: string;
  messageId: string;
  subject: string;
  /** The inbound message's text (the provider's extracted reply text when it has one). */
  text: string;
  /** When the inbound message was received (its payload's timestamp). */
  timestamp: Date;
  /**
   * Earlier messages of the conversation between this customer and us, oldest first, by their
   * timestamps: the customer's own messages and our replies to them, nobody else's.
   */
  thread: ReadonlyArray<{ direction: 'inbound' | 'outbound'; text: string; timestamp: Date }>;
  /** How many messages of the thread were left out because someone else wrote them (counted, never shown). */
  othersLeftOut?: number;
  /** Set when `text` is only the start of the message (knowledge/message-text.ts): the prompt must say so. */
  textCut?: TextCut | null;
  /**
   * Whether the inbox has a knowledge base (KNOWLEDGE_INBOX_COLLECTIONS, synced): then the reply
   * must be grounded in `articles` and cite them, or hand off.
   */
  knowledge: boolean;
  /** The top articles for this message (the best section of each), best first; what the model may cite. */
  articles: readonly KnowledgeArticle[];
  /**
   * The customer's language (customer-language.ts): `reply` is the ISO 639-1 code to answer in,
   * null when the detector could not name it (then: the language of the message). Absent: not detected.
   */
  language?: { detected: string | null; reply: string | null };
  /** The message's attachments: name, type, size and the text a reader extracted (never the bytes). */
  attachments?: readonly DraftAttachment[];
  /**
   * Set with a knowledge base: whether the best article is below the relevance floor
   * (knowledge/relevance-floor.ts). Below it the drafter hands off with `reason`: the offline
   * drafter always; the model is told so in its prompt.
   */
  relevance?: RelevanceVerdict;
}

export interface KnowledgeArticle {
  /** `<collection>:<source>#<section>`: the id the answer cites. */
  id: string;
  title: string;
  heading: string | null;
  text: string;
}

/**
 * What every drafter answers (the model through the AI SDK's structured output, schema in
 * answer.ts): the reply, the ids of the articles it used, and a hand-off when it does not know.
 */
export interface DraftAnswer {
  reply: string;
  citations: string[];
  handoff: null | { reason: string };
  /** The tokens the model reported for this call, when it did (a rehearsal's report counts them). */
  usage?: { inputTokens: number; outputTokens: number };
}

export interface DraftOptions {
  /** The activity's cancellation: a cancelled or timed-out attempt stops waiting for the model. */
  signal?: AbortSignal;
}

export interface Drafter {
  /** Recorded with the stored draft, so a person can see which provider (and model) wrote it. */
  readonly name: string;
  draft(request: DraftRequest, options?: DraftOptions): Promise<DraftAnswer>;
  /**
   * What the drafter tells the model for this inbox (its system prompt), so the draft check can
   * hold a reply that echoes it (activities/draft/draft-check.ts); absent for a drafter without instructions.
   */
  instructionsFor?(inboxId: string): string | undefined;
}

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
}

export interface DraftOptions {
  /** The activity's cancellation: a cancelled or timed-out attempt stops waiting for the model. */
  signal?: AbortSignal;
}

export interface Drafter {
  /** Recorded with the stored draft, so a person can see which provider (and model) wrote it. */
  readonly name: string;
  draft(request: DraftRequest, options?: DraftOptions): Promise<string>;
  /**
   * What the drafter tells the model for this inbox (its system prompt), so the draft check can
   * hold a reply that echoes it (activities/draft/draft-check.ts); absent for a drafter without instructions.
   */
  instructionsFor?(inboxId: string): string | undefined;
}

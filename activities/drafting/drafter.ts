/**
 * The drafting provider interface. The workflow asks for one draft per message; the draft
 * activity stores the text before anything is sent, so a drafter is called once per message
 * however often the workflow is retried or replayed.
 */

export interface DraftRequest {
  inboxId: string;
  messageId: string;
  subject: string;
  /** The inbound message's text (the provider's extracted reply text when it has one). */
  text: string;
  /** Earlier messages of the thread, oldest first, by their timestamps. */
  thread: ReadonlyArray<{ direction: 'inbound' | 'outbound'; text: string; timestamp: Date }>;
}

export interface Drafter {
  /** Recorded with the stored draft, so a person can see which provider wrote it. */
  readonly name: string;
  draft(request: DraftRequest): Promise<string>;
}

/** Model output is checked before it is stored: non-empty plain text of a sane length. */
export const MAX_DRAFT_CHARACTERS = 10_000;

/**
 * What a rehearsal keeps of one message, in Postgres (rehearsal_results.result), read by the report,
 * the comparison and the desk. The texts are the customer's words, the draft and the team's answer,
 * kept as live drafts are kept (never in Temporal's history) and deleted with the rehearsal.
 */
export interface RehearsalResult {
  threadId: string;
  subject: string;
  /** The customer's words (the provider's extracted reply text when it has one), clipped. */
  text: string;
  receivedAt: string;
  /** When the drafter was asked: what it drafted and why it would not go out on its own. */
  draft: null | {
    text: string;
    drafter: string;
    citations: string[];
    /** The articles the drafter was given (ids, best first). */
    considered: string[];
    /** The model's own reason for a hand-off (its words). */
    handoffReason: string | null;
    holds: string[];
    /** Whether the inbox needs a reviewer's approval first (APPROVAL_REQUIRED_INBOXES). */
    approval: boolean;
  };
  /** The messages of the same sender's burst this message's reply would answer (turn rules). */
  covers: string[];
  coveredBy: string | null;
  /** The failure's type when the model failed or AgentMail could not be read. */
  failure: string | null;
  /** What the team actually did: the next message of ours in the thread after this one. */
  team: null | {
    messageId: string;
    sentAt: string;
    afterMs: number;
    text: string;
    /** Its non-empty lines, quoted lines (`>`) left out. */
    lines: number;
    escalated: boolean;
  };
  usage: null | { inputTokens: number; outputTokens: number; estimated: boolean };
  /** Wall-clock time of the rehearsal of this message, and of the model call within it. */
  elapsedMs: number;
  modelMs: number | null;
}

/** Texts as Postgres's jsonb can hold them: no U+0000 (nor other C0 controls but tab and line breaks). */
export function storable(text: string, max = 20_000): string {
  // eslint-disable-next-line no-control-regex -- finding control characters is this pattern's purpose.
  const clean = text.replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, '');
  return clean.length > max ? `${clean.slice(0, max)}\n[… shortened]` : clean;
}

/** The non-empty lines of an answer, quoted lines (`>`) left out: "answered in one line" is one. */
export const answerLines = (text: string): number =>
  text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('>')).length;

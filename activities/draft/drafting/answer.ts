import { z } from 'zod';
import type { DraftAnswer, DraftRequest } from './drafter';

/**
 * The structured answer every drafter gives, and the rule that judges it: a hand-off the model
 * asked for, a citation of an article it was not given, or (with a knowledge base) a reply citing
 * nothing all count as a hand-off — the reply is not sent without a person.
 */

export const draftAnswerSchema = z.object({
  reply: z.string().describe('The body of the reply to the customer, plain text.'),
  citations: z
    .array(z.string())
    .describe('The ids of the articles the reply is based on, exactly as given; empty if none.'),
  handoff: z
    .object({ reason: z.string().describe('Why a person must answer, in one sentence.') })
    .nullable()
    .describe('null when the reply answers the message; else why a person must answer instead.'),
});

/**
 * Why the draft was handed to a person: the model said so, it cited what it was not given, or it
 * cited nothing; or, decided before any drafter is asked (customer-mail.ts), the message is in a
 * language the team does not answer, is about a topic a person answers (HANDOFF_TOPICS), depends
 * on an attachment no reader could read, or reads like the mail a person answers in the hand-off
 * examples (`learned`, HANDOFF_EXAMPLES).
 */
export type HandoffKind = 'model' | 'bad-citation' | 'no-citation' | 'language' | 'topic' | 'attachment' | 'learned';

export interface JudgedAnswer {
  reply: string;
  citations: string[];
  handoff: null | { kind: HandoffKind; reason: string };
}

export function judgeAnswer(answer: DraftAnswer, request: Pick<DraftRequest, 'knowledge' | 'articles'>): JudgedAnswer {
  const given = new Set(request.articles.map((a) => a.id));
  const citations = [...new Set(answer.citations.map((c) => c.trim()).filter(Boolean))];
  if (answer.handoff !== null)
    return {
      reply: answer.reply,
      citations,
      handoff: { kind: 'model', reason: answer.handoff.reason.trim() || 'the model handed off' },
    };
  const unknown = citations.filter((c) => !given.has(c));
  if (unknown.length > 0)
    return {
      reply: answer.reply,
      citations,
      handoff: {
        kind: 'bad-citation',
        reason: `the reply cites ${unknown.map((c) => JSON.stringify(c.slice(0, 200))).join(', ')}, not among the articles given`,
      },
    };
  if (request.knowledge && citations.length === 0)
    return {
      reply: answer.reply,
      citations,
      handoff: {
        kind: 'no-citation',
        reason:
          request.articles.length === 0
            ? 'no article in the knowledge base matches this message'
            : 'the reply cites no article of the knowledge base',
      },
    };
  return { reply: answer.reply, citations, handoff: null };
}

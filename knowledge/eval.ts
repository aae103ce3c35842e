import { z } from 'zod';

/**
 * The evaluation's arithmetic (scripts/eval.ts runs it): retrieval recall@3 and MRR over the
 * questions an article answers, and — when a real model drafted — hand-off precision and recall
 * and the share of drafts whose citations were all among the articles given. Pure.
 */

const questionSchema = z.object({
  text: z.string().min(1),
  /** File paths relative to the knowledge folder (or URLs); empty with `handoff: true` when no article answers. */
  expected_sources: z.array(z.string().min(1)),
  handoff: z.boolean(),
});
export type LabelledQuestion = z.output<typeof questionSchema>;

/** JSON Lines, one question a line; blank lines ignored; a bad line is an error naming its number. */
export function parseQuestions(jsonl: string): LabelledQuestion[] {
  const questions: LabelledQuestion[] = [];
  for (const [index, line] of jsonl.split('\n').entries()) {
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`line ${index + 1} is not JSON`);
    }
    const parsed = questionSchema.safeParse(value);
    if (!parsed.success)
      throw new Error(`line ${index + 1} is not {"text": "…", "expected_sources": ["…"], "handoff": false}`);
    questions.push(parsed.data);
  }
  return questions;
}

export interface QuestionOutcome {
  /** Sources of the retrieved articles, best first (one per article). */
  retrieved: readonly string[];
  /** Set when a drafter ran: whether its answer was a hand-off, and whether every citation was given. */
  drafted?: { handoff: boolean; citationsValid: boolean };
}

export interface EvalScores {
  recallAt3: number;
  mrr: number;
  /** Null when no drafter ran (or none predicted / expected a hand-off): nothing to divide by. */
  handoffPrecision: number | null;
  handoffRecall: number | null;
  citationValidity: number | null;
  questions: number;
  /** Questions an article answers: the ones recall and MRR are taken over. */
  answerable: number;
}

export function scoreEvaluation(
  questions: readonly LabelledQuestion[],
  outcomes: readonly QuestionOutcome[],
): EvalScores {
  let recall = 0;
  let reciprocal = 0;
  let answerable = 0;
  let truePositive = 0;
  let predicted = 0;
  let expected = 0;
  let drafted = 0;
  let valid = 0;
  questions.forEach((question, i) => {
    const outcome = outcomes[i] ?? { retrieved: [] };
    if (question.expected_sources.length > 0) {
      answerable += 1;
      const top3 = new Set(outcome.retrieved.slice(0, 3));
      recall += question.expected_sources.filter((s) => top3.has(s)).length / question.expected_sources.length;
      const first = outcome.retrieved.findIndex((s) => question.expected_sources.includes(s));
      reciprocal += first === -1 ? 0 : 1 / (first + 1);
    }
    if (outcome.drafted) {
      drafted += 1;
      if (outcome.drafted.citationsValid) valid += 1;
      if (outcome.drafted.handoff) predicted += 1;
      if (question.handoff) expected += 1;
      if (outcome.drafted.handoff && question.handoff) truePositive += 1;
    }
  });
  return {
    recallAt3: answerable ? recall / answerable : 0,
    mrr: answerable ? reciprocal / answerable : 0,
    handoffPrecision: drafted && predicted ? truePositive / predicted : null,
    handoffRecall: drafted && expected ? truePositive / expected : null,
    citationValidity: drafted ? valid / drafted : null,
    questions: questions.length,
    answerable,
  };
}

const figure = (value: number | null) => (value === null ? 'n/a' : value.toFixed(2));

/** The machine-readable last line of `npm run eval`. */
export const summaryLine = (s: EvalScores): string =>
  `recall@3=${figure(s.recallAt3)} mrr=${figure(s.mrr)} handoff_precision=${figure(s.handoffPrecision)} handoff_recall=${figure(s.handoffRecall)} questions=${s.questions}`;

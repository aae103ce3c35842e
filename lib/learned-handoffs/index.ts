import { buildVocabulary, countFeatures, vectorise } from './features';
import { type FitOptions, fit, score } from './logistic-regression';

/**
 * Hand-offs learned from examples (HANDOFF_EXAMPLES; docs/knowledge.md "Hand-offs learned from
 * examples"): mail labelled as a person's (`"handoff": true`) or the articles' to answer, in the
 * eval's question format. The topics file names subjects; what it cannot name is a customer's own
 * case told in an article's words ("my refund is £10 short", "the code says invalid", "still no
 * reply to my warranty claim"), which shares every word with the article that does not answer it.
 * Such mail has a shape (an order number, what happened, how long ago, what is wrong), and a
 * linear model over its words and letter pieces learns that shape from a few hundred examples.
 * Deterministic: the same examples give the same model, so the offline drafter's decisions and the
 * eval's figures reproduce.
 */

export interface HandoffExample {
  text: string;
  handoff: boolean;
}

export interface LearnedHandoffs {
  examples: number;
  handoffs: number;
  /** At or above it, the message is a person's. */
  threshold: number;
  /** How likely a person answers this message, 0 to 1. */
  likelihood(text: string): number;
}

/**
 * Chosen by leave-one-set-out cross-validation over the bundled sets (docs/knowledge.md): the
 * threshold is where answerable mail is rarely taken (precision over 0.95 alone), because the
 * topics and the relevance floor catch hand-offs too and a wrongly held answer costs a customer a
 * day.
 */
export const DEFAULT_THRESHOLD = 0.7;
const FIT: FitOptions = { c: 10, steps: 300, learningRate: 0.05 };
export const MIN_EXAMPLES_OF_EACH = 20;

/** Throws unless there are enough of each kind to learn from; returns the number of hand-offs. */
export function checkExamples(examples: readonly HandoffExample[]): number {
  const handoffs = examples.filter((e) => e.handoff).length;
  if (handoffs < MIN_EXAMPLES_OF_EACH || examples.length - handoffs < MIN_EXAMPLES_OF_EACH)
    throw new Error(
      `the examples hold ${handoffs} hand-offs and ${examples.length - handoffs} answerable messages; learning needs at least ${MIN_EXAMPLES_OF_EACH} of each`,
    );
  return handoffs;
}

export function learnHandoffs(
  examples: readonly HandoffExample[],
  options: { threshold?: number; fit?: Partial<FitOptions> } = {},
): LearnedHandoffs {
  const handoffs = checkExamples(examples);
  const counts = examples.map((e) => countFeatures(e.text));
  const vocabulary = buildVocabulary(counts);
  const model = fit(
    counts.map((c) => vectorise(c, vocabulary)),
    examples.map((e) => e.handoff),
    vocabulary.idf.length,
    { ...FIT, ...options.fit },
  );
  return {
    examples: examples.length,
    handoffs,
    threshold: options.threshold ?? DEFAULT_THRESHOLD,
    likelihood: (text) => score(model, vectorise(countFeatures(text), vocabulary)),
  };
}

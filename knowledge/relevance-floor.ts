import type { CollectionRelevance } from './retrieve';

/**
 * The relevance floor (issue 37): full-text search almost always returns *something*, so "the best
 * article" alone would answer "are you hiring?" with the click-and-collect article. Below its
 * collection's floor no article is relevant enough, and the drafter hands off — the offline
 * drafter always, the model because its prompt says so — with the reason recorded.
 *
 * The score is retrieve's CollectionRelevance: the share of the customer's words (of the email, or
 * of its best-matching sentence) that the top article holds, 0 to 1, whatever the collection's size.
 */

/**
 * The default floor, calibrated on the bundled help centre's ten tuned question sets pooled (736
 * questions, 156 hand-offs) with the bundled topics counted (`calibrateFloor` in scripts/eval.ts:
 * the best F1 of the whole hand-off decision among floors that hand off at most 15 % of the
 * answerable questions; per set: `npm run eval -- --held-out-N --calibrate`). Lexical overlap
 * separates "no article covers this" poorly — "are you hiring?" shares "hire" with the rental
 * article — so the floor catches mail that shares little with every article, and the topics the
 * rest (docs/knowledge.md). It was 0.29, fitted on one set before the topics: over the ten sets
 * 0.29 catches 2 hand-offs more than 0.24 and hands off 10 answerable questions more, 7 of them
 * in other languages, whose words reach the articles only through the synonyms. A team calibrates
 * its own per collection (KNOWLEDGE_RELEVANCE_FLOORS).
 */
export const DEFAULT_RELEVANCE_FLOOR = 0.24;

/**
 * The second signal (issue 37, point 3): an email whose asking sentences hold this many words that
 * no article holds (retrieve's `unknownWords`: "sponsor", "wheelchair", "dog"…) asks about something
 * the collection does not cover — unless the best article still holds half its words or more
 * (SHARE_THAT_COVERS_UNKNOWN_WORDS). One such word is not enough: customers' everyday words
 * ("lunch", "printer") are often missing from articles (measured 1, 2, 3: docs/knowledge.md).
 * The share was 0.6 before the topics; with them, over the ten tuned sets pooled, 0.6 catches 4
 * hand-offs more than 0.5 and hands off 12 answerable questions more ("need it by Saturday":
 * "lakes", "trousers"), since the topics now catch most of what the words did.
 */
export const UNKNOWN_WORDS_FOR_HANDOFF = 2;
export const SHARE_THAT_COVERS_UNKNOWN_WORDS = 0.5;

/** Collection → floor, `*` for every other collection (KNOWLEDGE_RELEVANCE_FLOORS); unlisted: the default. */
export type RelevanceFloors = Readonly<Record<string, number>>;

export const floorFor = (collection: string, floors: RelevanceFloors): number =>
  floors[collection] ?? floors['*'] ?? DEFAULT_RELEVANCE_FLOOR;

/** Whether the best article is relevant enough; when not, the reason (numbers and names only: no customer text). */
export interface RelevanceVerdict {
  below: boolean;
  reason: string | null;
}

/**
 * Below the floor when no collection is relevant enough (one is enough): none whose best score
 * reaches its floor, or every one that does is "uncovered" — the email asks about
 * UNKNOWN_WORDS_FOR_HANDOFF words or more that no article holds, and its best article holds under
 * SHARE_THAT_COVERS_UNKNOWN_WORDS of its words. Pure.
 */
export function relevanceVerdict(relevance: readonly CollectionRelevance[], floors: RelevanceFloors): RelevanceVerdict {
  if (relevance.length === 0) return { below: true, reason: 'no collection to search' };
  const aboveFloor = relevance.filter((r) => r.score >= floorFor(r.collection, floors));
  const uncovered = (r: CollectionRelevance) =>
    (r.unknownWords ?? 0) >= UNKNOWN_WORDS_FOR_HANDOFF && r.score < SHARE_THAT_COVERS_UNKNOWN_WORDS;
  if (aboveFloor.some((r) => !uncovered(r))) return { below: false, reason: null };
  if (aboveFloor.length > 0) {
    const [r] = aboveFloor;
    return {
      below: true,
      reason: `the question asks about ${r!.unknownWords} words no article holds, and the best article holds ${r!.score.toFixed(2)} of its words (< ${SHARE_THAT_COVERS_UNKNOWN_WORDS.toFixed(2)})`,
    };
  }
  const scores = relevance
    .map((r) => `${r.collection} ${r.score.toFixed(2)} < ${floorFor(r.collection, floors).toFixed(2)}`)
    .join(', ');
  return {
    below: true,
    reason: `no article is relevant enough to answer from (the share of the message's words the best article holds, below the collection's floor: ${scores})`,
  };
}

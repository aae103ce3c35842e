/**
 * What the learned hand-offs read of a message: its words, its pairs of words and the three- to
 * five-letter pieces of each word, weighted by how rare each is among the examples (tf-idf, each
 * kind scaled to unit length). The letter pieces are why one example set serves seven languages:
 * "rembourse", "remboursement" and "remboursé" share most of theirs, and a typo keeps most of its.
 * Digits read as 0, so "order 30788" and "order 29517" are one pattern, not two rare numbers.
 */

const WORD = /[\p{L}\p{N}]+(?:'[\p{L}\p{N}]+)*/gu;
const PIECE_LENGTHS = [3, 4, 5] as const;

export function wordsOf(text: string): string[] {
  const normalised = text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/\p{N}/gu, '0');
  return (normalised.match(WORD) ?? []).filter((word) => word.length >= 2);
}

/** Each feature's count in the text, in two kinds: words (`w`) and pairs of words (`b`); letter pieces (`c`). */
export function countFeatures(text: string): { words: Map<string, number>; pieces: Map<string, number> } {
  const words = new Map<string, number>();
  const pieces = new Map<string, number>();
  const add = (into: Map<string, number>, feature: string) => into.set(feature, (into.get(feature) ?? 0) + 1);
  const list = wordsOf(text);
  list.forEach((word, i) => {
    add(words, `w ${word}`);
    if (i > 0) add(words, `b ${list[i - 1]} ${word}`);
    const padded = ` ${word} `;
    for (const n of PIECE_LENGTHS)
      for (let start = 0; start + n <= padded.length; start++) add(pieces, `c ${padded.slice(start, start + n)}`);
  });
  return { words, pieces };
}

/** A sparse vector: feature indices and their values, indices ascending. */
export interface SparseVector {
  indices: Int32Array;
  values: Float64Array;
}

/** The features seen in at least two examples, with their inverse document frequency (smoothed, as scikit-learn's). */
export interface Vocabulary {
  index: Map<string, number>;
  idf: Float64Array;
}

export function buildVocabulary(
  documents: ReadonlyArray<ReturnType<typeof countFeatures>>,
  minDocuments = 2,
): Vocabulary {
  const seenIn = new Map<string, number>();
  for (const doc of documents)
    for (const kind of [doc.words, doc.pieces]) for (const f of kind.keys()) seenIn.set(f, (seenIn.get(f) ?? 0) + 1);
  // Sorted, so the same examples give the same indices on every machine and every run.
  const kept = [...seenIn].filter(([, n]) => n >= minDocuments).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const index = new Map<string, number>();
  const idf = new Float64Array(kept.length);
  kept.forEach(([feature, n], i) => {
    index.set(feature, i);
    idf[i] = Math.log((1 + documents.length) / (1 + n)) + 1;
  });
  return { index, idf };
}

/** tf-idf with a logarithmic count (1 + ln n), each kind scaled to length 1 so neither drowns the other. */
export function vectorise(counts: ReturnType<typeof countFeatures>, vocabulary: Vocabulary): SparseVector {
  const entries: Array<[number, number]> = [];
  for (const kind of [counts.words, counts.pieces]) {
    const part: Array<[number, number]> = [];
    for (const [feature, n] of kind) {
      const i = vocabulary.index.get(feature);
      if (i !== undefined) part.push([i, (1 + Math.log(n)) * vocabulary.idf[i]!]);
    }
    // A loop, not Math.hypot(...values): a long message has more features than a call has arguments.
    let squares = 0;
    for (const [, v] of part) squares += v * v;
    const length = Math.sqrt(squares);
    if (length > 0) for (const [i, v] of part) entries.push([i, v / length]);
  }
  entries.sort(([a], [b]) => a - b);
  return { indices: Int32Array.from(entries, ([i]) => i), values: Float64Array.from(entries, ([, v]) => v) };
}

import type { Db } from '../lib/db';
import { cosineSimilarity, storedEmbeddings, type Embedder } from './embeddings';
import { configurationNameFor, detectLanguage } from './language';
import { boundMessageText, searchableText } from './message-text';
import { normaliseNumbers } from './numbers';

/**
 * Retrieval where Postgres runs: full-text search over the sections of the collections an inbox
 * may use, each in its collection's text-search language (`websearch_to_tsquery` over the GIN
 * index). The customer's words are OR-ed — an email is not a search box — and the candidates are
 * ranked in the same query by how rare each shared word is in the collection and where it stands
 * (title, heading, text): a BM25-like score, since `ts_rank` knows no word rarity and a word like
 * "order" is in every other title. Only the best section of an article is kept, so the top k are k
 * different articles. A collection's synonym groups (synonym-store.ts) widen the query in the same
 * statement: a phrase of a group in the customer's words brings in the group's other phrases.
 */

export interface RetrievedSection {
  /** `<collection>:<source>#<n>`: what the model cites. */
  id: string;
  collection: string;
  source: string;
  title: string;
  heading: string | null;
  body: string;
  /** The section's content hash: part of the draft's request, so an edited article changes it. */
  contentHash: string;
  rank: number;
}

/** What the draft's operation request keeps of a retrieval: ids, versions and ranks, never text. */
export interface RetrievalRef {
  id: string;
  version: string;
  rank: number;
}

export const retrievalRefs = (sections: readonly RetrievedSection[]): RetrievalRef[] =>
  sections.map((s) => ({ id: s.id, version: s.contentHash.slice(0, 16), rank: Math.round(s.rank * 1e6) / 1e6 }));

/**
 * The words of a text in order, lower case: letters and digits only, so nothing in them is query
 * syntax; numbers read as sync reads the articles' ("10,000mm" is "10000" and "mm": numbers.ts).
 */
export const wordsOf = (text: string): string[] =>
  normaliseNumbers(text)
    .toLowerCase()
    .normalize('NFC')
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);

/** Words a customer writes, as search terms (`or` and `and` would be operators to websearch_to_tsquery). */
export function searchTerms(text: string, max = 60): string[] {
  const words = wordsOf(text).filter((w) => w.length >= 2 && w.length <= 40 && w !== 'or' && w !== 'and');
  return [...new Set(words)].slice(0, max);
}

/** What to search for, in which collections, and how the caller stops it. */
export interface RetrievalQuery {
  collections: readonly string[];
  /** The customer's text (the subject may lead it); only its first MESSAGE_TEXT_MAX_CHARS are read. */
  text: string;
  limit: number;
  embedder?: Embedder | null;
  /** The activity's cancellation: checked before every query, so a cancelled attempt stops within one. */
  signal?: AbortSignal;
  /** Called before every query (the activity's heartbeat), so a long retrieval is seen alive, and a dead one is not. */
  heartbeat?: () => void;
}

/**
 * At most this many of an email's sentences are searched on their own (besides the whole text),
 * the first distinct ones: an email asks two or three things, not hundreds, and each search is a
 * query. With the spelling look-up (two queries) and, for a message in another language than a
 * collection's, the look-up of the synonym phrases in its language (one), a retrieval is at most
 * MAX_RETRIEVAL_QUERIES queries, whatever the email (issue 39: a 5,000-line email was ~15,000).
 */
export const MAX_SENTENCE_SEARCHES = 6;
export const MAX_RETRIEVAL_QUERIES = 2 + 1 + 1 + MAX_SENTENCE_SEARCHES;

/**
 * How relevant the best article is, per collection: of each text searched (the whole email, each
 * of its sentences), the share of its words (lexemes; a synonym's or a correction's counting what
 * it counts in the ranking) that its top section holds; the best of them. A share, not the BM25
 * score: BM25 depends on the collection's size (in a one-article collection every word is in every
 * article, so every rarity is nil), a share does not. Below its collection's floor nothing is
 * relevant enough: the drafter hands off (relevance-floor.ts).
 */
export interface CollectionRelevance {
  collection: string;
  /** 0 (nothing matched) to 1 (the best article holds every word of the email, or of one of its sentences). */
  score: number;
  /**
   * How many distinct words of the sentences that ask (those ending in `?`; every sentence when
   * none does) no article of the searched collections holds, nor a synonym, nor as a spelling
   * correction: "dog", "sponsorship", "wheelchair". Counted only for a message detected in the
   * collections' language (else every word would be one) and without names (a capitalised word
   * inside a sentence: "Leeds", "Osprey"), digits or words under 3 letters; and only in collections
   * with synonym groups and MIN_VOCABULARY_FOR_UNKNOWN_WORDS words. 0 when not counted.
   */
  unknownWords?: number;
}

export interface Retrieval {
  sections: RetrievedSection[];
  relevance: CollectionRelevance[];
}

/**
 * The sections best matching a customer's email. An email often asks two things at once ("how
 * much is shipping to Sweden, and how long does it take?"): each of its sentences is searched on
 * its own as well as the whole, and the rankings are fused (reciprocal rank fusion, the whole
 * counting double), so the best article for each question makes the top k instead of the one that
 * shares the most words overall. Bounded: the text is cut (message-text.ts), the sentences
 * searched are capped and de-duplicated, and the caller's signal and heartbeat are honoured before
 * every query.
 */
export async function retrieve(db: Db, query: RetrievalQuery): Promise<RetrievedSection[]> {
  return (await retrieveWithRelevance(db, query)).sections;
}

/** retrieve(), with how relevant each collection's best article is (for the relevance floor). */
export async function retrieveWithRelevance(db: Db, query: RetrievalQuery): Promise<Retrieval> {
  if (!query.embedder) return textRetrieve(db, query);
  const candidates = await textRetrieve(db, { ...query, limit: Math.max(20, query.limit) });
  if (candidates.sections.length === 0) return candidates;
  beforeQuery(query);
  const text = boundMessageText(query.text).text;
  return { ...candidates, sections: await rerank(db, candidates.sections, text, query.embedder, query.limit) };
}

/** Stops a cancelled retrieval before its next query, and says it is alive. */
function beforeQuery(query: Pick<RetrievalQuery, 'signal' | 'heartbeat'>): void {
  query.signal?.throwIfAborted();
  query.heartbeat?.();
}

/** Embedding weight in the re-ranking: half the text rank (normalised to the best), half the cosine. */
const EMBEDDING_WEIGHT = 0.5;

async function rerank(
  db: Db,
  candidates: RetrievedSection[],
  text: string,
  embedder: Embedder,
  limit: number,
): Promise<RetrievedSection[]> {
  const [vectors, queryVector] = await Promise.all([
    storedEmbeddings(
      db,
      candidates.map((c) => c.id),
      embedder.name,
    ),
    embedder.embed(text),
  ]);
  const best = Math.max(...candidates.map((c) => c.rank)) || 1;
  return candidates
    .map((c) => {
      const vector = vectors.get(c.id);
      const cosine = vector ? Math.max(0, cosineSimilarity(queryVector, vector)) : 0;
      return { ...c, rank: (1 - EMBEDDING_WEIGHT) * (c.rank / best) + EMBEDDING_WEIGHT * cosine };
    })
    .sort((a, b) => b.rank - a.rank || (a.id < b.id ? -1 : 1))
    .slice(0, limit);
}

async function textRetrieve(db: Db, query: RetrievalQuery): Promise<Retrieval> {
  const bounded = boundMessageText(query.text).text;
  const whole = searchableText(bounded) || bounded;
  const nothing = { sections: [], relevance: query.collections.map((collection) => ({ collection, score: 0 })) };
  if (query.collections.length === 0 || query.limit <= 0 || searchTerms(whole).length === 0) return nothing;
  const subject = subjectOf(whole);
  const questions = firstQuestionsFirst(questionsIn(whole)).filter((part) => part !== subject);
  const parts = [...(subject === null ? [] : [subject]), ...questions].slice(0, MAX_SENTENCE_SEARCHES);
  const texts = [whole, ...(parts.length < 2 ? [] : parts)];
  // The customer's language (issue 37): where it is not a collection's own, the synonym phrases are
  // looked for in the customer's words read in it as well (configurationNameFor: Postgres's name).
  const code = detectLanguage(whole);
  const detected = configurationNameFor(code ?? '');
  beforeQuery(query);
  const { corrections, languages, unknown, vocabularySize, messageStopWords, hasSynonyms } = await spellingCorrections(
    db,
    query.collections,
    [...new Set(texts.flatMap((text) => searchTerms(text)))],
    detected ?? null,
  );
  const messageLanguage = detected !== undefined && languages.some((l) => l !== detected) ? detected : null;
  // A message in another language than a collection's: its own stop words ("die", "de", "ya") are
  // not words to search the articles for (read as English they are words, and match at random).
  const skipped: ReadonlySet<string> = messageLanguage !== null ? messageStopWords : new Set<string>();
  let messagePhrases: MessagePhrase[] = [];
  if (messageLanguage !== null) {
    beforeQuery(query);
    messagePhrases = await phrasesInMessageLanguage(db, query.collections, messageLanguage, whole);
  }
  // Nor, when the collection's synonyms bridge its language (phrases of theirs found in it), are its
  // words taken for typos of the articles' words ("payer" is not "paper"): the synonyms are the
  // bridge, the guesses only noise. Without such phrases a correction is the only bridge there is
  // (a cognate spelled close to the article's word), and is kept (docs/knowledge.md, "Ranking").
  const usedCorrections = messagePhrases.length > 0 ? new Map<string, string>() : corrections;
  const rankings: SearchHit[][] = [];
  for (const [index, text] of texts.entries()) {
    beforeQuery(query);
    const limit = index === 0 ? Math.max(query.limit, 10) : 10;
    rankings.push(
      await search(db, {
        collections: query.collections,
        text,
        corrections: usedCorrections,
        skipped,
        limit,
        messageLanguage,
        messagePhrases,
        subject: index === 0 ? subject : null,
      }),
    );
  }
  // Words no article holds say something only for mail detected in the articles' language: not a
  // Polish email (no stemmer), nor one the detector cannot name (Norwegian or Danish on one line);
  // and only where synonym groups say how customers name the articles' topics: without them "hire"
  // or "money back" is a word no article holds, and a third of the answerable mail was handed off.
  const sameLanguage = detected !== undefined && languages.every((l) => l === detected);
  const unknownWords =
    sameLanguage && hasSynonyms && vocabularySize >= MIN_VOCABULARY_FOR_UNKNOWN_WORDS
      ? askedWords(whole).filter((word) => unknown.has(word)).length
      : 0;
  const relevance = query.collections.map((collection) => ({
    collection,
    unknownWords,
    score: Math.max(
      0,
      ...rankings.flatMap((ranking) =>
        ranking
          .filter((hit) => hit.collection === collection)
          .slice(0, 1)
          .map((hit) => Math.min(1, hit.matched / hit.queryWords)),
      ),
    ),
  }));
  const plain = (hit: SearchHit): RetrievedSection => {
    const { queryWords: _queryWords, matched: _matched, ...section } = hit;
    return section;
  };
  if (rankings.length === 1) return { sections: rankings[0]!.slice(0, query.limit).map(plain), relevance };
  const fused = new Map<string, { section: RetrievedSection; score: number }>();
  for (const [position, ranking] of rankings.entries()) {
    const weight = position === 0 ? WHOLE_TEXT_WEIGHT : 1;
    ranking.forEach((hit, index) => {
      const entry = fused.get(hit.id) ?? { section: plain(hit), score: 0 };
      entry.score += weight / (RRF_K + index + 1);
      fused.set(hit.id, entry);
    });
  }
  const sections = [...fused.values()]
    .sort((a, b) => b.score - a.score || (a.section.id < b.section.id ? -1 : 1))
    .slice(0, query.limit)
    .map(({ section, score }) => ({ ...section, rank: score }));
  return { sections, relevance };
}

/**
 * The whole email's ranking counts twice a sentence's in the fusion: a long email's sentences
 * include chat ("going to scotland next month") whose matches are noise, while the whole text
 * weighs every word by its rarity. Measured 1, 2, 3 (docs/knowledge.md, "Ranking"): 2 was best on
 * both the bundled and the held-out questions.
 */
const WHOLE_TEXT_WEIGHT = 2;

/**
 * In the whole email's search, a word of its subject line counts twice a word of its body: a
 * subject is the customer's own one-line summary ("Backpack seam ripped", "Swap for bigger size"),
 * while the body adds circumstances whose words compete with it. A weight on the words (BM25 still
 * weighs them by rarity and place) and not a ranking of its own in the fusion: measured as a
 * ranking counting 3 it gained more on the sets whose mail has subjects, but a generic subject
 * ("A question") then put its one matching article first whatever the body asked. Measured 1, 1.5,
 * 2, 3 (docs/knowledge.md, "Ranking"): 2 and 3 alike, better than 1 and 1.5.
 */
const SUBJECT_WEIGHT = 2;

/**
 * The subject of an email: the first line of its searchable text when more lines follow (the
 * draft step puts the subject first, on its own line), with at least one search term.
 */
export function subjectOf(text: string): string | null {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  if (lines.length < 2 || searchTerms(lines[0]!).length === 0) return null;
  return lines[0]!;
}

/** Reciprocal rank fusion's usual constant: a first place counts, a tenth place still a little. */
const RRF_K = 10;

/**
 * What a spelling correction counts against a word the customer wrote as the collection does (1):
 * a correction is a guess, and a word no article uses ("charlie", "bravo") is corrected to the
 * nearest one that some article does. Half: measured 1 and 0.5 (docs/knowledge.md, "Ranking").
 */
const CORRECTION_WEIGHT = 0.5;

/**
 * What a word that only a synonym group brought into the query counts, per word of the customer's
 * phrase that brought it in, against one of the customer's own words (1). Expanded words are
 * guesses about what the customer meant: at full weight a group that fires on a common word
 * ("order") lifts every article that uses any of its phrases above the one in the customer's own
 * words. Measured at 0.2 to 0.5 on the bundled questions (the held-out ones checked after): 0.25 gave
 * the best bundled MRR but let "send back a tent" find the article about tents being back in stock
 * before the returns article; 0.35 is the lowest that does not (docs/knowledge.md, "Ranking").
 */
const SYNONYM_WEIGHT = 0.35;

/**
 * BM25's length normalisation (b: 0 none, 1 full): a word found once in a long section counts less
 * than once in a short one, so an article that mentions everything does not outrank the one about
 * the question. Half, because sections are short and alike in length (0, 0.3, 0.5, 0.75 measured).
 */
const LENGTH_NORMALISATION = 0.5;

/**
 * The sentences that ask something (`?`) before the others, each group in the email's order: when
 * only MAX_SENTENCE_SEARCHES of them are searched, the questions are, not the lines of a pasted log.
 * The fused ranking does not depend on the order of the searches.
 */
const firstQuestionsFirst = (parts: readonly string[]): string[] => [
  ...parts.filter((part) => part.endsWith('?')),
  ...parts.filter((part) => !part.endsWith('?')),
];

/**
 * The sentences (and `…, and …` halves) of an email that hold at least two search terms, each
 * once: a sentence whose search terms are those of one before it (a repeated line, a quoted
 * footer) would search the same thing again.
 */
export function questionsIn(text: string): string[] {
  const seen = new Set<string>();
  const parts: string[] = [];
  // Each piece keeps the `?` that ended it (firstQuestionsFirst reads it; the search ignores it).
  for (const raw of text.split(/(?<=\?)|[.!;\n]+|,\s*(?:and|but|also|plus)\s+|\band also\b/i)) {
    const part = raw.replace(/^[\s?]+/, '').trim();
    const terms = searchTerms(part);
    if (terms.length < 2) continue;
    const key = [...terms].sort().join(' ');
    if (seen.has(key)) continue;
    seen.add(key);
    parts.push(part);
  }
  return parts;
}

/**
 * The distinct words (lower case) of the sentences of an email that ask something (`?`), or of
 * all its sentences when none does, leaving out names — a word capitalised inside its sentence
 * ("the Leeds shop", "an Osprey pack"): a name is not a topic the articles should hold — and
 * words with digits or under 3 letters. What the "no article holds it" count reads.
 */
export function askedWords(text: string): string[] {
  const sentences = questionsIn(text);
  const asking = sentences.filter((sentence) => sentence.endsWith('?'));
  const words = new Set<string>();
  for (const sentence of asking.length > 0 ? asking : sentences) {
    const tokens = sentence
      .normalize('NFC')
      .split(/[^\p{L}\p{N}]+/u)
      .filter(Boolean);
    tokens.forEach((token, index) => {
      if (index > 0 && /^\p{Lu}/u.test(token)) return;
      if (token.length < 3 || /\p{N}/u.test(token)) return;
      words.add(token.toLowerCase());
    });
  }
  return [...words];
}

/**
 * Words no article holds are counted (CollectionRelevance.unknownWords) only in collections that
 * hold at least this many distinct words (lexemes): in a handful of short articles everyday words
 * ("weekend", "one") are missing too, and the count would hand off covered questions. The bundled
 * help centre (48 short articles), the only collection the count was measured on, holds 491.
 */
export const MIN_VOCABULARY_FOR_UNKNOWN_WORDS = 400;

/** A section as one search ranked it, with the number of the searched text's words (lexemes) in its collection's language. */
type SearchHit = RetrievedSection & { queryWords: number; matched: number };

/**
 * In the message's own language, a one-word synonym phrase of at least this many letters (its
 * stem) is also found at the start of a longer word: compounds and derivations ("retourner" for
 * "retour", "Rückgabefrist" for "Rückgabe"), which languages like German and Norwegian make freely.
 * Shorter stems ("eu", "tent") would start too many unrelated words. Measured 4 to 7 and off on the
 * bundled and held-out questions (docs/knowledge.md, "Ranking").
 */
const MESSAGE_LANGUAGE_PREFIX_MIN = 5;

async function search(
  db: Db,
  query: {
    collections: readonly string[];
    text: string;
    limit: number;
    corrections: ReadonlyMap<string, string>;
    /** The text-search configuration of the message's language (`german`), null: none, or the collections' own. */
    messageLanguage: string | null;
    /** The synonym phrases found in the whole message read in that language (phrasesInMessageLanguage). */
    messagePhrases: readonly MessagePhrase[];
    /** The email's subject line, when `text` holds it and more: its words count SUBJECT_WEIGHT. */
    subject: string | null;
    /** Words not to search for: the message language's stop words, for a message in another language. */
    skipped: ReadonlySet<string>;
  },
): Promise<SearchHit[]> {
  const terms = searchTerms(query.text).filter((term) => !query.skipped.has(term));
  if (terms.length === 0 || query.collections.length === 0 || query.limit <= 0) return [];
  const corrections = [
    ...new Set(terms.flatMap((term) => (query.corrections.has(term) ? [query.corrections.get(term)!] : []))),
  ].sort();
  const rows = await db.query<SearchHit>(
    // Synonyms (synonym-store.ts): every phrase of each group one of whose phrases is in the
    // customer's words ($6, in order) joins the query, each collection's groups its own. A phrase
    // counts only where a section holds the whole phrase (by the same rule): "send back" scores
    // "send" and "back" where they stand together, not every "back". A word it brought in counts $7
    // of one of the customer's own words for each word of the customer's phrase that brought it
    // (at most 1): "send back" → "return" counts 0.7, "order" → "bestellung" 0.35. The phrases are
    // looked for in the customer's words read in the collection's language and, when the message
    // is in another one Postgres has a configuration for ($10), in that one too, through unaccent,
    // among those phrasesInMessageLanguage found in the whole message ($11): "Rücksendungen" and
    // "Ruckgabe" find the German phrases "rücksendung" and "rückgabe" an English reading would not.
    // Candidates: the live sections that match the query (the GIN index), one row per query lexeme
    // they hold. Each lexeme's document frequency is counted over the candidates, which are exactly
    // the sections that hold it; a section scores BM25-like: idf × where it stands (title 3,
    // heading 2, text 1) × term frequency, saturated and normalised by the section's length in
    // distinct words (k1 = 1.2, b = $8) × the word's weight. Only an article's best section is kept.
    // In the whole email's search a word of its subject line ($12) weighs $13 (SUBJECT_WEIGHT).
    `WITH said AS (
       SELECT c.name AS collection, c.language, to_tsvector(c.language, $6) AS words,
              cfg.oid::regconfig AS message_language, to_tsvector(cfg.oid::regconfig, unaccent($6)) AS message_words
         FROM knowledge_collections c LEFT JOIN pg_ts_config cfg ON cfg.cfgname = $10 AND cfg.oid <> c.language
        WHERE c.name = ANY($1::text[])
     ),
     found AS (
       SELECT hit.collection, hit.line, cardinality(hit.lexemes) AS words
         FROM said JOIN knowledge_synonyms hit ON hit.collection = said.collection AND said.words @@ hit.match
       UNION ALL
       SELECT p.collection, p.line, p.words
         FROM said JOIN jsonb_to_recordset($11::jsonb) AS p(collection text, line integer, words integer, match text)
           ON p.collection = said.collection
        WHERE said.message_words @@ p.match::tsquery
     ),
     synonyms AS (
       SELECT phrase.collection, phrase.lexemes, phrase.match,
              least(1, $7::float8 * max(found.words)) AS weight
         FROM found
         JOIN knowledge_synonyms phrase ON phrase.collection = found.collection AND phrase.line = found.line
        GROUP BY phrase.collection, phrase.lexemes, phrase.match
     ),
     query AS (
       SELECT said.collection,
              websearch_to_tsquery(said.language, $2) || to_tsquery('simple', $3) || coalesce(
                (SELECT string_agg(format('(%s)', y.match), ' | ') FROM synonyms y WHERE y.collection = said.collection
                )::tsquery, ''::tsquery) AS q,
              tsvector_to_array(to_tsvector(said.language, $2)) AS lexemes,
              tsvector_to_array(to_tsvector(said.language, $12)) AS subject_lexemes,
              -- The words the share is taken of: read in the message's language too, the fewer, so
              -- a German email's "wie" and "die" (no English stop words) do not count as words to match
              -- (without the " or " between the terms, no stop word in other languages).
              least(length(to_tsvector(said.language, $2)),
                    length(to_tsvector(said.message_language, unaccent(replace($2, ' or ', ' '))))) AS words
         FROM said
     ),
     hits AS (
       SELECT s.id, s.collection, s.source, s.position, u.lexeme, w.weight,
              length(s.search)::float8 AS len,
              cardinality(u.positions) AS tf,
              -- How many of the customer's words this lexeme stands for, for the relevance share: its
              -- own word or a correction one, a synonym's the words of the phrase that brought it.
              CASE WHEN w.weight = 1 OR u.lexeme = ANY(query.lexemes) OR u.lexeme = ANY($4::text[]) THEN 1 ELSE round(w.weight / $7::float8) END AS covers,
              CASE WHEN 'A' = ANY(u.weights) THEN 3 WHEN 'B' = ANY(u.weights) THEN 2 ELSE 1 END AS place
         FROM knowledge_sections s
         JOIN query ON query.collection = s.collection
         JOIN knowledge_articles a ON a.collection = s.collection AND a.source = s.source AND a.retired_at IS NULL
         CROSS JOIN LATERAL unnest(s.search) AS u
         CROSS JOIN LATERAL (
           SELECT CASE WHEN u.lexeme = ANY(query.subject_lexemes) THEN $13::float8
                       WHEN u.lexeme = ANY(query.lexemes) THEN 1 WHEN u.lexeme = ANY($4::text[]) THEN $9::float8
                       ELSE (SELECT max(y.weight) FROM synonyms y
                              WHERE y.collection = s.collection AND u.lexeme = ANY(y.lexemes) AND s.search @@ y.match)
                  END AS weight
         ) AS w
        WHERE s.search @@ query.q AND w.weight IS NOT NULL
     ),
     total AS (
       SELECT count(*)::float8 AS n, avg(length(s.search))::float8 AS avglen FROM knowledge_sections s
         JOIN knowledge_articles a ON a.collection = s.collection AND a.source = s.source AND a.retired_at IS NULL
        WHERE s.collection = ANY($1::text[])
     ),
     df AS (SELECT lexeme, count(DISTINCT id)::float8 AS df FROM hits GROUP BY lexeme),
     scored AS (
       SELECT h.id, h.collection, h.source, h.position,
              sum(ln(1 + (total.n - df.df + 0.5) / (df.df + 0.5)) * h.place * (h.tf * 2.2) / (h.tf + 1.2 * (1 - $8::float8 + $8::float8 * h.len / total.avglen))
                  * h.weight) AS rank,
              sum(h.covers) AS matched
         FROM hits h JOIN df USING (lexeme) CROSS JOIN total
        GROUP BY h.id, h.collection, h.source, h.position
     ),
     best AS (
       SELECT DISTINCT ON (collection, source) id, rank, matched FROM scored ORDER BY collection, source, rank DESC, position
     )
     SELECT s.id, s.collection, s.source, s.title, s.heading, s.body, s.content_hash AS "contentHash",
            best.rank::float8 AS rank, best.matched::float8 AS matched,
            greatest(1, query.words)::int AS "queryWords"
       FROM best JOIN knowledge_sections s USING (id) JOIN query ON query.collection = s.collection
      ORDER BY best.rank DESC, s.id
      LIMIT $5`,
    [
      query.collections,
      terms.join(' or '),
      corrections.length > 0 ? corrections.join(' | ') : '',
      corrections,
      query.limit,
      wordsOf(query.text).join(' '),
      SYNONYM_WEIGHT,
      LENGTH_NORMALISATION,
      CORRECTION_WEIGHT,
      query.messageLanguage,
      JSON.stringify(query.messagePhrases),
      query.subject === null ? '' : searchTerms(query.subject).join(' '),
      SUBJECT_WEIGHT,
    ],
  );
  return rows.rows;
}

/** A synonym phrase found in a message read in its own language: how many words it has there, and its tsquery. */
interface MessagePhrase {
  collection: string;
  line: number;
  words: number;
  match: string;
}

/**
 * The synonym phrases of the collections (those not in `language` already) found in the whole
 * message read in `language`, through unaccent: one query per retrieval, so each search then only
 * checks these few against its own text (a sentence's phrases are among the whole text's) instead of
 * reading every phrase of the collection again. A phrase is found by phraseto_tsquery here (its
 * words next to each other, a stop word between counting as one), stricter than the stored rule;
 * a one-word phrase whose stem has MESSAGE_LANGUAGE_PREFIX_MIN letters or more also at the start
 * of a longer word.
 */
async function phrasesInMessageLanguage(
  db: Db,
  collections: readonly string[],
  language: string,
  text: string,
): Promise<MessagePhrase[]> {
  const { rows } = await db.query<MessagePhrase>(
    // The message is read once (MATERIALIZED: not once per phrase); each phrase once per retrieval.
    `WITH message AS MATERIALIZED (
       SELECT c.name AS collection, cfg.oid::regconfig AS language, to_tsvector(cfg.oid::regconfig, unaccent($3)) AS words
         FROM knowledge_collections c JOIN pg_ts_config cfg ON cfg.cfgname = $2 AND cfg.oid <> c.language
        WHERE c.name = ANY($1::text[])
     )
     SELECT y.collection, y.line, max(length(read.words))::int AS words, read.match::text AS match
       FROM message
       JOIN knowledge_synonyms y ON y.collection = message.collection
       CROSS JOIN LATERAL (SELECT to_tsvector(message.language, unaccent(y.phrase)) AS words) AS phrase
       CROSS JOIN LATERAL (
         SELECT phrase.words,
                CASE WHEN length(phrase.words) = 1 AND char_length((tsvector_to_array(phrase.words))[1]) >= $4::int
                     THEN (quote_literal((tsvector_to_array(phrase.words))[1]) || ':*')::tsquery
                     ELSE phraseto_tsquery(message.language, unaccent(y.phrase)) END AS match
       ) AS read
      WHERE numnode(read.match) > 0 AND message.words @@ read.match
      GROUP BY y.collection, y.line, read.match::text`,
    [collections, language, text, MESSAGE_LANGUAGE_PREFIX_MIN],
  );
  return rows;
}

/**
 * Customers mistype (`shipp`, `norwey`, `pasword`): a term whose lexeme the collections do not hold
 * is matched to the nearest lexeme they do (same first letter, one edit for short words, two for
 * longer ones), from the collections' own vocabulary. The corrections are lexemes already. A word
 * of the collections' synonyms is known too (`hire` is expanded to `rent`, not corrected to `hike`).
 * Asked once per retrieval for the terms of every text it searches (two queries), at most
 * MAX_CORRECTED_TERMS of them: term → its correction; and the collections' languages.
 */
async function spellingCorrections(
  db: Db,
  collections: readonly string[],
  allTerms: readonly string[],
  messageLanguage: string | null,
): Promise<{
  messageStopWords: Set<string>;
  /** Whether the collections have synonym groups at all. */
  hasSynonyms: boolean;
  corrections: Map<string, string>;
  languages: string[];
  unknown: Set<string>;
  vocabularySize: number;
}> {
  const terms = allTerms.slice(0, MAX_CORRECTED_TERMS);
  // With the terms' lexemes, the languages the collections are searched in: whether the message's is another.
  const rows = await db.query<{
    term: string;
    lexemes: string[] | null;
    languages: string[];
    stop: boolean;
    synonyms: boolean;
  }>(
    `SELECT t AS term, array_agg(DISTINCT l) FILTER (WHERE l IS NOT NULL) AS lexemes,
            array_agg(DISTINCT c.language::text) AS languages,
            coalesce((SELECT length(to_tsvector(cfg.oid::regconfig, t)) = 0 FROM pg_ts_config cfg WHERE cfg.cfgname = $3), false) AS stop,
            EXISTS (SELECT 1 FROM knowledge_synonyms y WHERE y.collection = ANY($1::text[])) AS synonyms
       FROM unnest($2::text[]) AS t
       CROSS JOIN knowledge_collections c
       LEFT JOIN LATERAL unnest(tsvector_to_array(to_tsvector(c.language, t))) AS l ON true
      WHERE c.name = ANY($1::text[])
      GROUP BY t`,
    [collections, terms, messageLanguage],
  );
  // The collections' vocabulary, and those of the email's own lexemes that are words of their synonyms.
  const words = (
    await db.query<{ lexeme: string; synonym: boolean }>(
      `SELECT DISTINCT u.lexeme, false AS synonym FROM knowledge_sections s CROSS JOIN LATERAL unnest(s.search) AS u
        WHERE s.collection = ANY($1::text[])
       UNION ALL
       SELECT DISTINCT l, true FROM knowledge_synonyms y CROSS JOIN LATERAL unnest(y.lexemes) AS l
        WHERE y.collection = ANY($1::text[]) AND y.lexemes && $2::text[] AND l = ANY($2::text[])`,
      [collections, [...new Set(rows.rows.flatMap((row) => row.lexemes ?? []))]],
    )
  ).rows;
  const vocabulary = new Set(words.filter((w) => !w.synonym).map((w) => w.lexeme));
  const known = new Set(words.map((w) => w.lexeme));
  const corrections = new Map<string, string>();
  const unknown = new Set<string>();
  for (const row of rows.rows) {
    const lexemes = row.lexemes ?? [];
    if (lexemes.length === 0 || lexemes.some((l) => known.has(l))) continue; // a stop word, or known
    if (/\d/.test(row.term) || row.term.length < 4) {
      unknown.add(row.term);
      continue;
    }
    let best: { word: string; distance: number } | null = null;
    for (const word of vocabulary) {
      if (word[0] !== row.term[0] || Math.abs(word.length - row.term.length) > 2) continue;
      const limit = row.term.length <= 5 ? 1 : 2;
      const distance = Math.min(...[row.term, ...lexemes].map((form) => editDistance(form, word, limit)));
      if (
        distance <= limit &&
        (best === null || distance < best.distance || (distance === best.distance && word < best.word))
      )
        best = { word, distance };
    }
    if (best && /^[\p{L}\p{N}]+$/u.test(best.word)) corrections.set(row.term, best.word);
    else unknown.add(row.term);
  }
  return {
    corrections,
    languages: rows.rows[0]?.languages ?? [],
    unknown,
    vocabularySize: vocabulary.size,
    messageStopWords: new Set(rows.rows.filter((row) => row.stop).map((row) => row.term)),
    hasSynonyms: rows.rows[0]?.synonyms ?? false,
  };
}

/** The edit-distance loop is terms × vocabulary: the terms looked at are bounded too. */
const MAX_CORRECTED_TERMS = 200;

/** Optimal string alignment distance (a transposition is one edit), or limit + 1 once it is surely above limit. */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, d[i - 2]![j - 2]! + 1);
      d[i]![j] = value;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The collections an inbox may use (KNOWLEDGE_INBOX_COLLECTIONS): its own entry, else the `*`
 * entry, else `default` (the collection a bare KNOWLEDGE_DIR fills). Only those that exist count.
 */
export function collectionsFor(inboxId: string, map: Readonly<Record<string, readonly string[]>>): string[] {
  return [...(map[inboxId.toLowerCase()] ?? map['*'] ?? ['default'])];
}

/** Of `collections`, those that hold at least one live article: an inbox with none has no knowledge base. */
export async function liveCollections(db: Db, collections: readonly string[]): Promise<string[]> {
  if (collections.length === 0) return [];
  const rows = await db.query<{ collection: string }>(
    `SELECT DISTINCT collection FROM knowledge_articles WHERE collection = ANY($1::text[]) AND retired_at IS NULL`,
    [collections],
  );
  return rows.rows.map((r) => r.collection).sort();
}

import { inTransaction, type Db } from '../lib/db';
import { sha256Hex } from '../lib/hashing';
import { normaliseNumbers } from './numbers';
import { articleUrl, parseArticle } from './sections';
import type { SynonymStats } from './synonym-store';
import type { SourceDocument } from './sources';

/**
 * Loads a collection's articles into Postgres, idempotently, by source and content hash: an
 * unchanged article is not touched (a rerun changes nothing), a changed one has its sections
 * replaced, one no longer among the sources is retired (kept for the citations that name it, never
 * searched again), one that comes back is searched again. One transaction per collection, under
 * an advisory lock, so the schedule and `npm run knowledge:sync` can overlap safely.
 */

export interface CollectionPlan {
  /** `default` for a bare KNOWLEDGE_DIR; lower case letters, digits, `-` and `_`. */
  collection: string;
  /** A Postgres text-search configuration (`english`, `german`, `simple`, …). */
  language: string;
  documents: readonly SourceDocument[];
  /** Sources that could not be read this time (a page that did not answer): kept as they are, not retired. */
  keep?: readonly string[];
}

export interface SyncStats {
  collection: string;
  added: number;
  changed: number;
  unchanged: number;
  retired: number;
  sections: number;
  /** The language, or how articles are read for search (SEARCH_VERSION), changed since the last sync: every section was re-indexed. */
  reindexed: boolean;
  /** Sections given an embedding this time (only with embeddings configured). */
  embedded?: number;
  /** The collection's synonym groups (plan.ts), when it has or had any. */
  synonyms?: SynonymStats;
}

/** A section's id: what the model cites and the draft's request names. Stable while the article keeps its source. */
export const sectionId = (collection: string, source: string, position: number) =>
  `${collection}:${source}#${position}`;

export async function syncCollection(db: Db, plan: CollectionPlan): Promise<SyncStats> {
  const stats: SyncStats = {
    collection: plan.collection,
    added: 0,
    changed: 0,
    unchanged: 0,
    retired: 0,
    sections: 0,
    reindexed: false,
  };
  return inTransaction(db, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('knowledge:' || $1))", [plan.collection]);
    const language = (
      await client.query<{ cfg: string }>('SELECT cfgname AS cfg FROM pg_ts_config WHERE cfgname = $1', [plan.language])
    ).rows[0]?.cfg;
    if (language === undefined)
      throw new Error(
        `text-search language ${JSON.stringify(plan.language)} is not one Postgres knows (SELECT cfgname FROM pg_ts_config)`,
      );
    const previous = await client.query<{ language: string; search_version: number }>(
      'SELECT language::text AS language, search_version FROM knowledge_collections WHERE name = $1',
      [plan.collection],
    );
    await client.query(
      `INSERT INTO knowledge_collections (name, language, search_version) VALUES ($1, $2::regconfig, $3)
       ON CONFLICT (name) DO UPDATE SET language = EXCLUDED.language, search_version = EXCLUDED.search_version`,
      [plan.collection, language, SEARCH_VERSION],
    );
    const before = previous.rows[0];
    if (before && (before.language !== language || before.search_version !== SEARCH_VERSION)) {
      stats.reindexed = true;
      const sections = await client.query<{ id: string; title: string; heading: string | null; body: string }>(
        'SELECT id, title, heading, body FROM knowledge_sections WHERE collection = $1',
        [plan.collection],
      );
      for (const section of sections.rows)
        await client.query(
          `UPDATE knowledge_sections SET search = ${SEARCH_VECTOR('$2::regconfig', '$3::text', '$4::text', '$5::text')}
            WHERE id = $1`,
          [section.id, language, ...searchedText(section)],
        );
    }

    const known = new Map(
      (
        await client.query<{ source: string; content_hash: string; retired: boolean; url: string | null }>(
          'SELECT source, content_hash, retired_at IS NOT NULL AS retired, url FROM knowledge_articles WHERE collection = $1',
          [plan.collection],
        )
      ).rows.map((row) => [row.source, row]),
    );
    const seen = new Set<string>();
    for (const document of plan.documents) {
      if (seen.has(document.source)) continue;
      seen.add(document.source);
      const hash = sha256Hex(`${document.format}\n${document.content}`);
      const before = known.get(document.source);
      const url = articleUrl(document);
      // Articles synced before articles had a url get theirs without a change of content.
      if (before && before.content_hash === hash && before.url !== url)
        await client.query('UPDATE knowledge_articles SET url = $3 WHERE collection = $1 AND source = $2', [
          plan.collection,
          document.source,
          url,
        ]);
      if (before && before.content_hash === hash) {
        if (before.retired) {
          await client.query(
            'UPDATE knowledge_articles SET retired_at = NULL, synced_at = now() WHERE collection = $1 AND source = $2',
            [plan.collection, document.source],
          );
          stats.added += 1;
        } else stats.unchanged += 1;
        continue;
      }
      const article = parseArticle(document.content, document.format, document.fallbackTitle);
      await client.query(
        `INSERT INTO knowledge_articles (collection, source, content_hash, title, url) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (collection, source) DO UPDATE
           SET content_hash = EXCLUDED.content_hash, title = EXCLUDED.title, url = EXCLUDED.url,
               synced_at = now(), retired_at = NULL`,
        [plan.collection, document.source, hash, article.title, url],
      );
      await client.query('DELETE FROM knowledge_sections WHERE collection = $1 AND source = $2', [
        plan.collection,
        document.source,
      ]);
      for (const [index, section] of article.sections.entries()) {
        await client.query(
          `INSERT INTO knowledge_sections (id, collection, source, position, content_hash, title, heading, body, search)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ${SEARCH_VECTOR('$9::regconfig', '$10::text', '$11::text', '$12::text')})`,
          [
            sectionId(plan.collection, document.source, index + 1),
            plan.collection,
            document.source,
            index + 1,
            sha256Hex(`${article.title}\n${section.heading ?? ''}\n${section.body}`),
            article.title,
            section.heading,
            section.body,
            language,
            ...searchedText({ title: article.title, heading: section.heading, body: section.body }),
          ],
        );
      }
      stats.sections += article.sections.length;
      if (before) stats.changed += 1;
      else stats.added += 1;
    }
    const keep = new Set(plan.keep ?? []);
    for (const [source, row] of known) {
      if (seen.has(source) || keep.has(source) || row.retired) continue;
      await client.query('UPDATE knowledge_articles SET retired_at = now() WHERE collection = $1 AND source = $2', [
        plan.collection,
        source,
      ]);
      stats.retired += 1;
    }
    if (stats.added + stats.changed + stats.retired > 0 || stats.reindexed || !previous.rows[0])
      await client.query('UPDATE knowledge_collections SET synced_at = now() WHERE name = $1', [plan.collection]);
    return stats;
  });
}

/**
 * How articles are read for search; raised when that changes, so the next sync re-indexes what an
 * older build indexed (the sections' stored vectors would otherwise keep the old reading until their
 * article changes). 1: numbers in one form (numbers.ts).
 */
export const SEARCH_VERSION = 1;

/** A section's title, heading and text as the search reads them (retrieve's wordsOf reads the customer's words the same way). */
const searchedText = (section: {
  title: string;
  heading: string | null;
  body: string;
}): [string, string | null, string] => [
  normaliseNumbers(section.title),
  section.heading === null ? null : normaliseNumbers(section.heading),
  normaliseNumbers(section.body),
];

/** The article's title weighs most, then the section's heading, then its text. */
function SEARCH_VECTOR(language: string, title: string, heading: string, body: string): string {
  return `setweight(to_tsvector(${language}, ${title}), 'A') ||
          setweight(to_tsvector(${language}, coalesce(${heading}, '')), 'B') ||
          setweight(to_tsvector(${language}, ${body}), 'D')`;
}

import { inTransaction, type Db } from '../lib/db';
import { sha256Hex } from '../lib/hashing';
import type { SynonymGroup } from './synonyms';

/**
 * A collection's synonym groups in Postgres, replaced as a whole and idempotently, as its articles
 * are: the same groups in the same language change nothing, other groups replace them, none (the
 * setting removed) clears them. Each phrase is stored with its lexemes in the collection's language
 * and the tsquery that finds it in a customer's text, so a search only compares.
 */

export interface SynonymStats {
  /** Groups stored now (for `cleared`: the ones removed). */
  groups: number;
  /** `kept`: the file could not be loaded this time (reported as a problem); what was stored stays. */
  change: 'loaded' | 'replaced' | 'unchanged' | 'cleared' | 'kept';
}

/**
 * The matching rule (docs/knowledge.md, "Synonyms"): a phrase occurs in a text when its lexemes
 * (its words stemmed, stop words left out) stand in the text in the same order, each one or two
 * positions after the one before — at most one word between them. So `send back` is found in
 * "sending it back" but not in "send the parcel back", and `send it back` is the same phrase as
 * `send back`. As a tsquery: every placement spelled out, `('send' <1> 'back') | ('send' <2> 'back')`.
 * Lexemes are letters and digits only (the sync checks), so quoting them is all the syntax there is.
 */
export function phraseQuery(lexemes: readonly string[]): string {
  const [first, ...rest] = lexemes.map((lexeme) => `'${lexeme}'`);
  let placements = [first ?? ''];
  for (const next of rest)
    placements = placements.flatMap((placement) => [`${placement} <1> ${next}`, `${placement} <2> ${next}`]);
  return placements.map((placement) => `(${placement})`).join(' | ');
}

/** Part of the stored hash: a change of the rule above rebuilds every collection's matches at its next sync. */
const MATCH_RULE = 'in order, one or two positions apart';

/** Stores the collection's groups (null: it has none configured). The collection must exist (synced first). */
export async function syncSynonyms(
  db: Db,
  collection: string,
  groups: readonly SynonymGroup[] | null,
): Promise<SynonymStats | undefined> {
  return inTransaction(db, async (client) => {
    // The articles' lock: a schedule's sync and `npm run knowledge:sync` take turns per collection.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('knowledge:' || $1))", [collection]);
    const stored = (
      await client.query<{ language: string; hash: string | null; groups: number }>(
        `SELECT language::text AS language, synonyms_hash AS hash,
                (SELECT count(DISTINCT line)::int FROM knowledge_synonyms WHERE collection = c.name) AS groups
           FROM knowledge_collections c WHERE name = $1`,
        [collection],
      )
    ).rows[0];
    if (stored === undefined) throw new Error(`collection ${JSON.stringify(collection)} has not been synced`);
    if (groups === null) {
      if (stored.hash === null) return undefined;
      await client.query('DELETE FROM knowledge_synonyms WHERE collection = $1', [collection]);
      await client.query('UPDATE knowledge_collections SET synonyms_hash = NULL WHERE name = $1', [collection]);
      return { groups: stored.groups, change: 'cleared' };
    }
    const hash = sha256Hex(JSON.stringify({ rule: MATCH_RULE, language: stored.language, groups }));
    if (hash === stored.hash) return { groups: groups.length, change: 'unchanged' };

    const phrases = groups.flatMap((group) => group.phrases.map((phrase) => ({ line: group.line, phrase })));
    const { rows } = await client.query<{ lexemes: string[] }>(
      // Each phrase's lexemes in order of position (a repeated word counts at each of its places).
      `SELECT ARRAY(SELECT u.lexeme FROM unnest(to_tsvector($1::regconfig, p.phrase)) AS u, unnest(u.positions) AS at
                     ORDER BY at, u.lexeme) AS lexemes
         FROM unnest($2::text[]) WITH ORDINALITY AS p(phrase, n) ORDER BY p.n`,
      [stored.language, phrases.map((p) => p.phrase)],
    );
    const matches = phrases.flatMap((p, i) => {
      const lexemes = rows[i]?.lexemes ?? [];
      // No lexeme: all stop words, nothing to find. Anything but letters and digits cannot be quoted safely.
      if (lexemes.length === 0 || !lexemes.every((lexeme) => /^[\p{L}\p{N}]+$/u.test(lexeme))) return [];
      return [{ ...p, lexemes, match: phraseQuery(lexemes) }];
    });
    await client.query('DELETE FROM knowledge_synonyms WHERE collection = $1', [collection]);
    await client.query(
      `INSERT INTO knowledge_synonyms (collection, line, phrase, lexemes, match)
       SELECT $1, r.line, r.phrase, r.lexemes, r.match
         FROM jsonb_to_recordset($2::jsonb) AS r(line integer, phrase text, lexemes text[], match tsquery)`,
      [collection, JSON.stringify(matches)],
    );
    await client.query('UPDATE knowledge_collections SET synonyms_hash = $2 WHERE name = $1', [collection, hash]);
    return { groups: groups.length, change: stored.hash === null ? 'loaded' : 'replaced' };
  });
}

/** What stays stored when the collection's file could not be loaded this time. */
export async function keptSynonyms(db: Db, collection: string): Promise<SynonymStats | undefined> {
  const { rows } = await db.query<{ groups: number; configured: boolean }>(
    `SELECT (SELECT count(DISTINCT line)::int FROM knowledge_synonyms WHERE collection = c.name) AS groups,
            synonyms_hash IS NOT NULL AS configured
       FROM knowledge_collections c WHERE name = $1`,
    [collection],
  );
  return rows[0]?.configured ? { groups: rows[0].groups, change: 'kept' } : undefined;
}

import type { RetrievedSection } from '../../knowledge';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';

/**
 * The articles a reply cites, as people see them: title, section heading, a piece of the section's
 * text and a link. The link is the article's own `url` (front matter, or the page of
 * KNOWLEDGE_URLS, stored by the sync) or KNOWLEDGE_LINK_BASES' base for its collection plus its
 * path. The reply gets a line per cited article whose link it does not already hold, after the
 * draft check (these links are ours, from the configuration and the articles, not the model's).
 */

export interface CitedArticle {
  id: string;
  title: string;
  heading: string | null;
  /** The start of the section's text, for the desk. */
  text: string;
  url: string | null;
}

/** Enough of a section for a reviewer to see what the reply rests on. */
const CITED_TEXT_CHARACTERS = 600;

export async function citedArticles(
  deps: { db: Db; config: Pick<ActivityConfig, 'KNOWLEDGE_LINK_BASES'> },
  sections: readonly RetrievedSection[],
  citations: readonly string[],
): Promise<CitedArticle[]> {
  const cited = citations.flatMap((id) => sections.filter((s) => s.id === id).slice(0, 1));
  if (cited.length === 0) return [];
  const stored = await deps.db.query<{ collection: string; source: string; url: string | null }>(
    `SELECT collection, source, url FROM knowledge_articles
      WHERE (collection, source) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
    [cited.map((s) => s.collection), cited.map((s) => s.source)],
  );
  const urls = new Map(stored.rows.map((row) => [`${row.collection}\n${row.source}`, row.url]));
  return cited.map((s) => ({
    id: s.id,
    title: s.title,
    heading: s.heading,
    text: s.body.length > CITED_TEXT_CHARACTERS ? `${s.body.slice(0, CITED_TEXT_CHARACTERS)}…` : s.body,
    url: urls.get(`${s.collection}\n${s.source}`) ?? linkFromBase(deps.config.KNOWLEDGE_LINK_BASES, s),
  }));
}

function linkFromBase(bases: Readonly<Record<string, string>>, section: RetrievedSection): string | null {
  const base = bases[section.collection];
  if (base === undefined || /^https?:\/\//i.test(section.source)) return null;
  const path = section.source
    .replace(/\.(md|markdown|html?|txt)$/i, '')
    .split('/')
    .map(encodeURIComponent)
    .join('/');
  return new URL(path, base).toString();
}

/** The reply with a `Title: link` line for each cited article whose link it does not hold yet. */
export function withArticleLinks(text: string, cited: readonly CitedArticle[]): string {
  const missing = cited.filter((c): c is CitedArticle & { url: string } => c.url !== null && !text.includes(c.url));
  const unique = missing.filter((c, i) => missing.findIndex((d) => d.url === c.url) === i);
  if (unique.length === 0) return text;
  return `${text.trimEnd()}\n\n${unique.map((c) => `${c.title}: ${c.url}`).join('\n')}`;
}

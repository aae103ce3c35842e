import path from 'node:path';
import { readdirSync } from 'node:fs';
import { collectionEntries } from '../lib/config';
import type { Db } from '../lib/db';
import { embedMissing, type Embedder } from './embeddings';
import { fetchPages, readFolder, type SourceProblem } from './sources';
import { keptSynonyms, syncSynonyms, type SynonymStats } from './synonym-store';
import { readSynonymFile, SynonymFileError, type SynonymGroup } from './synonyms';
import { syncCollection, type CollectionPlan, type SyncStats } from './sync';

/**
 * What a sync loads, from the settings: KNOWLEDGE_DIR (`path`, or `name=path,…`) and KNOWLEDGE_URLS
 * (`url,…`, or `name=url`), each into its collection (`default` when unnamed), in its language, and
 * each collection's synonyms from KNOWLEDGE_SYNONYMS (`path`, or `name=path,…`).
 */

export interface KnowledgeSources {
  KNOWLEDGE_DIR?: string | undefined;
  KNOWLEDGE_URLS?: string | undefined;
  KNOWLEDGE_SYNONYMS?: string | undefined;
  KNOWLEDGE_LANGUAGE: string;
  KNOWLEDGE_COLLECTION_LANGUAGES: Readonly<Record<string, string>>;
}

export const configuredCollections = (sources: KnowledgeSources): string[] => [
  ...new Set(
    [...collectionEntries(sources.KNOWLEDGE_DIR), ...collectionEntries(sources.KNOWLEDGE_URLS)].map(
      (s) => s.collection,
    ),
  ),
];

export interface SyncReport {
  collections: SyncStats[];
  problems: SourceProblem[];
}

/**
 * The bundled help centre (examples/knowledge/) and the synonym groups written for it. A collection
 * synced from that folder loads them unless KNOWLEDGE_SYNONYMS names another file for it: the
 * README's figures for the bundled set are measured with them (`npm run eval`), so the documented
 * `npm run knowledge:sync` must run what was measured (issue 37), in the CLI and the worker's schedule alike.
 */
const BUNDLED_EXAMPLES = path.resolve(__dirname, '..', 'examples', 'knowledge');
export const BUNDLED_HELP_CENTRE = path.join(BUNDLED_EXAMPLES, 'help-centre');
export const BUNDLED_HELP_CENTRE_SYNONYMS = path.join(BUNDLED_EXAMPLES, 'synonyms.txt');
/**
 * The topics a person answers for the bundled shop (lib/handoff-topics.ts): a worker answering from
 * the bundled folder loads them unless HANDOFF_TOPICS names a file (activities/draft/customer-mail.ts),
 * as `npm run eval` does for the bundled sets, so what runs is what the figures measured.
 */
export const BUNDLED_HELP_CENTRE_TOPICS = path.join(BUNDLED_EXAMPLES, 'handoff-topics.txt');

/**
 * The bundled shop's labelled mail (its eval question sets, `questions*.jsonl`): the examples its
 * hand-offs are learned from unless HANDOFF_EXAMPLES says otherwise (lib/learned-handoffs/).
 */
export const bundledQuestionSets = (): string[] =>
  readdirSync(BUNDLED_EXAMPLES)
    .filter((name) => /^questions.*\.jsonl$/.test(name))
    .sort()
    .map((name) => path.join(BUNDLED_EXAMPLES, name));

/** Reads every configured source and syncs each collection; nothing configured, nothing done. */
export async function syncConfigured(
  db: Db,
  sources: KnowledgeSources,
  embedder: Embedder | null = null,
): Promise<SyncReport> {
  const folders = collectionEntries(sources.KNOWLEDGE_DIR);
  const pages = collectionEntries(sources.KNOWLEDGE_URLS);
  const synonymFiles = new Map(collectionEntries(sources.KNOWLEDGE_SYNONYMS).map((s) => [s.collection, s.value]));
  const collections = configuredCollections(sources);
  for (const folder of folders)
    if (!synonymFiles.has(folder.collection) && path.resolve(folder.value) === BUNDLED_HELP_CENTRE)
      synonymFiles.set(folder.collection, BUNDLED_HELP_CENTRE_SYNONYMS);
  const report: SyncReport = { collections: [], problems: [] };
  for (const [collection, file] of synonymFiles)
    if (!collections.includes(collection))
      report.problems.push({
        source: `synonyms of ${collection}`,
        problem: `${file}: KNOWLEDGE_DIR and KNOWLEDGE_URLS fill no collection "${collection}"; not loaded`,
      });
  for (const collection of collections) {
    const plan: CollectionPlan = {
      collection,
      language: sources.KNOWLEDGE_COLLECTION_LANGUAGES[collection] ?? sources.KNOWLEDGE_LANGUAGE,
      documents: [],
      keep: [],
    };
    const documents = [];
    for (const folder of folders.filter((f) => f.collection === collection)) {
      const read = await readFolder(folder.value);
      documents.push(...read.documents);
      report.problems.push(...read.problems);
    }
    const fetched = await fetchPages(pages.filter((p) => p.collection === collection).map((p) => p.value));
    documents.push(...fetched.documents);
    report.problems.push(...fetched.problems);
    const stats = await syncCollection(db, { ...plan, documents, keep: [...fetched.unreachable] });
    const synonyms = await loadSynonyms(db, collection, synonymFiles.get(collection), report.problems);
    if (synonyms) stats.synonyms = synonyms;
    // After the text is committed: an embedding service that is down leaves full-text search working.
    if (embedder) stats.embedded = await embedMissing(db, collection, embedder);
    report.collections.push(stats);
  }
  return report;
}

/**
 * A collection's synonyms from its file, or cleared when it has none configured. A file that cannot
 * be loaded (unreadable, malformed) is reported and leaves the stored groups as they were, as a page
 * that does not answer leaves its article; the articles were synced before and are not touched.
 */
async function loadSynonyms(
  db: Db,
  collection: string,
  file: string | undefined,
  problems: SourceProblem[],
): Promise<SynonymStats | undefined> {
  if (file === undefined) return syncSynonyms(db, collection, null);
  let groups: SynonymGroup[];
  try {
    groups = await readSynonymFile(file);
  } catch (error) {
    if (!(error instanceof SynonymFileError)) throw error;
    problems.push({
      source: `synonyms of ${collection}`,
      problem: `${error.message}; the groups loaded before are kept`,
    });
    return keptSynonyms(db, collection);
  }
  return syncSynonyms(db, collection, groups);
}

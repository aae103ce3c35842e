import { collectionEntries } from '../lib/config';
import type { Db } from '../lib/db';
import { embedMissing, type Embedder } from './embeddings';
import { fetchPages, readFolder, type SourceProblem } from './sources';
import { syncCollection, type CollectionPlan, type SyncStats } from './sync';

/**
 * What a sync loads, from the settings: KNOWLEDGE_DIR (`path`, or `name=path,…`) and KNOWLEDGE_URLS
 * (`url,…`, or `name=url`), each into its collection (`default` when unnamed), in its language.
 */

export interface KnowledgeSources {
  KNOWLEDGE_DIR?: string | undefined;
  KNOWLEDGE_URLS?: string | undefined;
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

/** Reads every configured source and syncs each collection; nothing configured, nothing done. */
export async function syncConfigured(
  db: Db,
  sources: KnowledgeSources,
  embedder: Embedder | null = null,
): Promise<SyncReport> {
  const folders = collectionEntries(sources.KNOWLEDGE_DIR);
  const pages = collectionEntries(sources.KNOWLEDGE_URLS);
  const report: SyncReport = { collections: [], problems: [] };
  for (const collection of configuredCollections(sources)) {
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
    // After the text is committed: an embedding service that is down leaves full-text search working.
    if (embedder) stats.embedded = await embedMissing(db, collection, embedder);
    report.collections.push(stats);
  }
  return report;
}

import { log } from '@temporalio/activity';
import { syncConfigured, type Embedder, type SyncStats } from '../../knowledge';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';

/**
 * The knowledge schedule's step (worker/schedules.ts): re-syncs KNOWLEDGE_DIR and KNOWLEDGE_URLS
 * (and the collections' KNOWLEDGE_SYNONYMS) into Postgres, as `npm run knowledge:sync` does. Idempotent (an unchanged article is not
 * touched), so a retry or an overlap with the CLI changes nothing twice. Only counts are returned.
 */
export interface KnowledgeSyncDeps {
  db: Db;
  /** Embeds new and changed sections when embeddings are configured. */
  embedder: Embedder | null;
  config: Pick<
    ActivityConfig,
    'KNOWLEDGE_DIR' | 'KNOWLEDGE_URLS' | 'KNOWLEDGE_SYNONYMS' | 'KNOWLEDGE_LANGUAGE' | 'KNOWLEDGE_COLLECTION_LANGUAGES'
  >;
}

export async function syncKnowledge(deps: KnowledgeSyncDeps): Promise<{ collections: SyncStats[]; problems: number }> {
  const report = await syncConfigured(deps.db, deps.config, deps.embedder);
  for (const problem of report.problems) log.warn('knowledge source skipped', { ...problem });
  return { collections: report.collections, problems: report.problems.length };
}

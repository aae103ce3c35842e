// Loads the knowledge base into Postgres: every article of KNOWLEDGE_DIR and every page of
// KNOWLEDGE_URLS, split into sections, in each collection's text-search language, and each
// collection's synonym groups from KNOWLEDGE_SYNONYMS. Idempotent: a rerun changes nothing, a
// changed article replaces its sections, a removed one is retired, an edited synonyms file replaces
// the collection's groups. The worker's schedule does the same every KNOWLEDGE_SYNC_INTERVAL.
//
//   npm run knowledge:sync                         DATABASE_URL, KNOWLEDGE_DIR and/or KNOWLEDGE_URLS
//   npm run knowledge:sync -- --dev                (the `npm run dev` database when DATABASE_URL is unset)
//
// docs/knowledge.md has the variables.
import { parseArgs } from 'node:util';
import { configuredCollections, createEmbedder, syncConfigured, type SynonymStats } from '../knowledge';
import { createDb } from '../lib/db';
import { runMain, SetupError } from './services/main';
import { knowledgeConfigFor } from './services/knowledge-config';

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { dev: { type: 'boolean', default: false } } });
  const config = knowledgeConfigFor({ dev: values.dev === true });
  if (configuredCollections(config).length === 0)
    throw new SetupError('nothing to sync: set KNOWLEDGE_DIR (a folder of articles) and/or KNOWLEDGE_URLS (pages)');
  const db = createDb(config.DATABASE_URL, { queryTimeoutMs: 120_000 });
  try {
    const report = await syncConfigured(db, config, createEmbedder(config));
    for (const problem of report.problems) console.error(`skipped ${problem.source}: ${problem.problem}`);
    for (const c of report.collections)
      console.log(
        `${c.collection}: ${c.added} added, ${c.changed} changed, ${c.unchanged} unchanged, ${c.retired} retired` +
          `${c.reindexed ? ' (re-indexed for its new language)' : ''}` +
          `${c.embedded !== undefined ? `; ${c.embedded} sections embedded` : ''}` +
          `${c.synonyms ? `; synonyms: ${synonymSummary(c.synonyms)}` : ''}`,
      );
    return 0;
  } finally {
    await db.end();
  }
}

/** `120 groups, unchanged`; `cleared (120 groups)` when the setting was removed. */
function synonymSummary({ groups, change }: SynonymStats): string {
  const count = `${groups} group${groups === 1 ? '' : 's'}`;
  if (change === 'cleared') return `cleared (${count})`;
  return `${count}, ${change === 'kept' ? 'kept as they were' : change}`;
}

if (require.main === module) runMain(main);

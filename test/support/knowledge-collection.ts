import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import { readFolder, readSynonymFile, syncCollection, syncSynonyms } from '../../knowledge';
import type { SourceDocument } from '../../knowledge/sources';
import { createDb, type Db } from '../../lib/db';
import { BUNDLED, BUNDLED_SYNONYMS } from '../../scripts/eval';
import { testEnv } from './env';

/**
 * The bundled help centre synced into a scratch collection of its own for one test file (with the
 * bundled synonym groups when asked), and dropped after it. Call at the top of a file: the hooks it
 * registers run before the file's own.
 */
export function bundledCollection(prefix: string, options: { synonyms?: boolean } = {}): { name: string; db: Db } {
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  let db: Db | undefined;
  before(async () => {
    db = createDb(testEnv.databaseUrl);
    const { documents } = await readFolder(BUNDLED.knowledge);
    await syncCollection(db, { collection: name, language: 'english', documents });
    if (options.synonyms) await syncSynonyms(db, name, await readSynonymFile(BUNDLED_SYNONYMS));
  });
  after(async () => {
    await db?.query('DELETE FROM knowledge_collections WHERE name = $1', [name]);
    await db?.end();
  });
  return {
    name,
    get db(): Db {
      if (db === undefined) throw new Error('bundledCollection: used before its before() hook ran');
      return db;
    },
  };
}

/** `documents` in a scratch collection (English, no synonyms) for the length of `use`, then dropped. */
export async function withCollection<T>(
  db: Db,
  prefix: string,
  documents: SourceDocument[],
  use: (collection: string) => Promise<T>,
): Promise<T> {
  const collection = `${prefix}-${randomUUID().slice(0, 8)}`;
  await syncCollection(db, { collection, language: 'english', documents });
  try {
    return await use(collection);
  } finally {
    await db.query('DELETE FROM knowledge_collections WHERE name = $1', [collection]);
  }
}

import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { cosineSimilarity, embed, embedMany } from 'ai';
import type { Db } from '../lib/db';

/**
 * Optional embeddings beside the text (KNOWLEDGE_EMBEDDINGS_URL + KNOWLEDGE_EMBEDDINGS_MODEL):
 * any OpenAI-compatible `/v1/embeddings` through the AI SDK's `embed`. The sync embeds the
 * sections that have none from this model; retrieval re-ranks the full-text candidates by cosine
 * similarity in process (no pgvector needed at help-centre sizes).
 */

export interface Embedder {
  /** The model's name, stored beside each embedding: another model re-embeds. */
  readonly name: string;
  embedMany(texts: string[]): Promise<number[][]>;
  embed(text: string): Promise<number[]>;
}

export interface EmbeddingSettings {
  KNOWLEDGE_EMBEDDINGS_URL?: string | undefined;
  KNOWLEDGE_EMBEDDINGS_MODEL?: string | undefined;
  KNOWLEDGE_EMBEDDINGS_API_KEY?: string | undefined;
}

/** The configured embedder, or null when embeddings are not configured (full-text search alone). */
export function createEmbedder(settings: EmbeddingSettings, timeoutMs = 15_000): Embedder | null {
  if (!settings.KNOWLEDGE_EMBEDDINGS_URL || !settings.KNOWLEDGE_EMBEDDINGS_MODEL) return null;
  const model = createOpenAICompatible({
    name: 'knowledge-embeddings',
    baseURL: settings.KNOWLEDGE_EMBEDDINGS_URL.replace(/\/+$/, ''),
    ...(settings.KNOWLEDGE_EMBEDDINGS_API_KEY ? { apiKey: settings.KNOWLEDGE_EMBEDDINGS_API_KEY } : {}),
  }).embeddingModel(settings.KNOWLEDGE_EMBEDDINGS_MODEL);
  return {
    name: settings.KNOWLEDGE_EMBEDDINGS_MODEL,
    embedMany: async (texts) =>
      (await embedMany({ model, values: texts, maxRetries: 0, abortSignal: AbortSignal.timeout(timeoutMs * 4) }))
        .embeddings,
    embed: async (text) =>
      (await embed({ model, value: text, maxRetries: 0, abortSignal: AbortSignal.timeout(timeoutMs) })).embedding,
  };
}

const BATCH = 32;

/** Embeds the collection's sections that have no embedding from this model; returns how many. */
export async function embedMissing(db: Db, collection: string, embedder: Embedder): Promise<number> {
  let done = 0;
  for (;;) {
    const rows = await db.query<{ id: string; title: string; heading: string | null; body: string }>(
      `SELECT id, title, heading, body FROM knowledge_sections
        WHERE collection = $1 AND embedding_model IS DISTINCT FROM $2 ORDER BY id LIMIT $3`,
      [collection, embedder.name, BATCH],
    );
    if (rows.rows.length === 0) return done;
    const vectors = await embedder.embedMany(rows.rows.map(sectionText));
    for (const [index, row] of rows.rows.entries())
      await db.query('UPDATE knowledge_sections SET embedding = $2, embedding_model = $3 WHERE id = $1', [
        row.id,
        vectors[index],
        embedder.name,
      ]);
    done += rows.rows.length;
  }
}

export const sectionText = (s: { title: string; heading: string | null; body: string }) =>
  [s.title, s.heading, s.body].filter(Boolean).join('\n');

/** The stored embeddings (of this model) of these sections. */
export async function storedEmbeddings(db: Db, ids: readonly string[], model: string): Promise<Map<string, number[]>> {
  if (ids.length === 0) return new Map();
  const rows = await db.query<{ id: string; embedding: number[] }>(
    'SELECT id, embedding FROM knowledge_sections WHERE id = ANY($1::text[]) AND embedding_model = $2',
    [ids, model],
  );
  return new Map(rows.rows.map((r) => [r.id, r.embedding]));
}

export { cosineSimilarity };

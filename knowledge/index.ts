/**
 * The team's own knowledge (issue 23): articles synced into Postgres (sync.ts, plan.ts) and
 * searched with its full-text search (retrieve.ts), with each collection's synonyms (synonyms.ts,
 * synonym-store.ts). May import contract/ and lib/ only; the draft
 * step (activities/draft/) and the CLIs (scripts/knowledge-sync.ts, scripts/eval.ts) use it.
 */
export * from './retrieve';
export * from './sync';
export * from './plan';
export * from './sources';
export * from './sections';
export * from './eval';
export * from './embeddings';
export * from './synonyms';
export * from './synonym-store';
export * from './language';
export * from './message-text';
export * from './relevance-floor';
export * from './numbers';

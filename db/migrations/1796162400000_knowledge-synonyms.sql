-- Up Migration

-- Synonym groups per collection (docs/knowledge.md, "Synonyms"): loaded by the sync from the
-- collection's KNOWLEDGE_SYNONYMS file (knowledge/synonym-store.ts), applied by the search
-- (knowledge/retrieve.ts) when a phrase of a group is in the customer's text.

-- The hash of what the collection's groups were built from (the groups, its language, the matching
-- rule): the same hash at the next sync, nothing is rewritten. NULL: the collection has no synonyms.
ALTER TABLE knowledge_collections ADD COLUMN synonyms_hash text CHECK (char_length(synonyms_hash) = 64);

-- A phrase of a group, the group known by its line in the file. `lexemes` are the phrase's words as
-- the collection's language indexes them (stemmed, stop words left out), in order; `match` is the
-- tsquery that finds them in a customer's text under the matching rule. A phrase the language
-- reduces to no lexeme is not stored.
CREATE TABLE knowledge_synonyms (
  collection text NOT NULL REFERENCES knowledge_collections (name) ON DELETE CASCADE,
  line       integer NOT NULL CHECK (line >= 1),
  phrase     text NOT NULL CHECK (char_length(phrase) BETWEEN 1 AND 200),
  lexemes    text[] NOT NULL CHECK (cardinality(lexemes) >= 1),
  match      tsquery NOT NULL,
  PRIMARY KEY (collection, line, phrase)
);
-- Which of a customer's words are words of the synonyms (retrieve.ts: those are not taken for typos).
CREATE INDEX knowledge_synonyms_lexemes_idx ON knowledge_synonyms USING gin (lexemes);

-- Down Migration
DROP TABLE knowledge_synonyms;
ALTER TABLE knowledge_collections DROP COLUMN synonyms_hash;

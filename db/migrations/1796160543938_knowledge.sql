-- Up Migration

-- The team's own knowledge (issue 23): help-centre articles loaded by `npm run knowledge:sync`
-- (knowledge/sync.ts) and searched by the draft step (knowledge/retrieve.ts). Full-text search
-- with Postgres's own text-search configurations: no extension, no service.

-- A collection: one folder or set of pages, searched in one text-search language.
CREATE TABLE knowledge_collections (
  name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  language   regconfig NOT NULL DEFAULT 'english',
  synced_at  timestamptz
);

-- An article: one file or page, known by its source (path relative to the folder, or URL) and
-- the hash of its content. A rerun with the same hash changes nothing; a removed one is retired
-- (kept, so a stored draft's citations still name something, but never searched).
CREATE TABLE knowledge_articles (
  collection   text NOT NULL REFERENCES knowledge_collections (name) ON DELETE CASCADE,
  source       text NOT NULL CHECK (char_length(source) BETWEEN 1 AND 2000),
  content_hash text NOT NULL CHECK (char_length(content_hash) = 64),
  title        text NOT NULL,
  synced_at    timestamptz NOT NULL DEFAULT now(),
  retired_at   timestamptz,
  PRIMARY KEY (collection, source)
);

-- A section of an article (split at its second-level headings), with its title and source: what
-- the model is shown and cites by id. `search` is built in the collection's language at sync.
CREATE TABLE knowledge_sections (
  id           text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 2200),
  collection   text NOT NULL,
  source       text NOT NULL,
  position     integer NOT NULL CHECK (position >= 1),
  content_hash text NOT NULL CHECK (char_length(content_hash) = 64),
  title        text NOT NULL,
  heading      text,
  body         text NOT NULL,
  search       tsvector NOT NULL,
  -- Optional embedding of title + heading + body, from the configured embedding model (its name
  -- beside it, so a change of model re-embeds); re-ranks the text-search candidates in process.
  embedding       real[],
  embedding_model text,
  FOREIGN KEY (collection, source) REFERENCES knowledge_articles (collection, source) ON DELETE CASCADE
);
CREATE INDEX knowledge_sections_search_idx ON knowledge_sections USING gin (search);
CREATE INDEX knowledge_sections_article_idx ON knowledge_sections (collection, source);

-- Down Migration
DROP TABLE knowledge_sections;
DROP TABLE knowledge_articles;
DROP TABLE knowledge_collections;

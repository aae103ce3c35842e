-- Up Migration

-- How a collection's search vectors were made (knowledge/sync.ts, SEARCH_VERSION): when the way
-- articles are read for search changes (issue 37: "10,000 mm" read as one number), the next sync
-- re-indexes every section of an older collection, unchanged articles too. 0: before versions.
ALTER TABLE knowledge_collections ADD COLUMN search_version integer NOT NULL DEFAULT 0;

-- Down Migration

ALTER TABLE knowledge_collections DROP COLUMN search_version;

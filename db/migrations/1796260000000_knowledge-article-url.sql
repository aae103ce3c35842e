-- Up Migration

-- An article's address for people (issue 37): the reply links each cited article, and the desk
-- shows the link. From the article's front matter (`url: https://…`) or, for a page of
-- KNOWLEDGE_URLS, the page itself; null when the article has none (a reply then names it only).
ALTER TABLE knowledge_articles
  ADD COLUMN url text CHECK (url IS NULL OR (char_length(url) <= 2000 AND url ~ '^https?://'));

-- Down Migration

ALTER TABLE knowledge_articles DROP COLUMN url;

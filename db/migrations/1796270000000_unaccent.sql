-- Up Migration

-- Customers write "Ruckgabe" for "Rückgabe", "telephone" for "téléphone" (issue 37): retrieval's
-- search in the message's own language reads both the customer's words and the articles through
-- unaccent, so an accent typed or left out matches either way. A trusted extension in Postgres 13+
-- (Debian's postgresql-15 ships it in contrib): the database's owner may create it, no superuser.
CREATE EXTENSION IF NOT EXISTS unaccent;

-- Down Migration

DROP EXTENSION IF EXISTS unaccent;

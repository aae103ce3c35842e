-- Up Migration

-- Rehearsals (docs/rehearsal.md): an inbox's past mail run through the decision, retrieval and the
-- drafter with every outward effect left out. Their own tables, never `operations`: nothing a
-- rehearsal stores can be taken for, or replayed as, a live effect. Texts (drafts, the team's
-- answers) live here as live drafts live in `operations`, never in Temporal's history.

CREATE TABLE rehearsals (
  rehearsal_id  text PRIMARY KEY CHECK (rehearsal_id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  inbox_id      text NOT NULL CHECK (char_length(inbox_id) BETWEEN 1 AND 1000),
  period_from   timestamptz NOT NULL,
  period_to     timestamptz NOT NULL CHECK (period_to > period_from),
  -- How many messages at most (the first in time order, or a sample of that size).
  message_limit integer NOT NULL CHECK (message_limit BETWEEN 1 AND 100000),
  sampled       boolean NOT NULL DEFAULT false,
  -- What was rehearsed: the drafter, the knowledge, the rules (no secret): compare shows it.
  configuration jsonb NOT NULL,
  configuration_hash text NOT NULL CHECK (char_length(configuration_hash) = 64),
  -- Set once the period has been listed; listed_total counts the inbound messages seen.
  listed_at     timestamptz,
  listed_total  integer,
  -- The listing stopped at the limit (no sample): the period holds more than was rehearsed.
  truncated     boolean NOT NULL DEFAULT false,
  finished_at   timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- REHEARSAL_RETENTION after its start: then it is deleted with everything it holds.
  expires_at    timestamptz NOT NULL
);
CREATE INDEX rehearsals_inbox_idx ON rehearsals (inbox_id, created_at DESC);
CREATE INDEX rehearsals_expires_idx ON rehearsals (expires_at);

-- The messages chosen, in the order they are rehearsed (position 0 first: oldest first).
CREATE TABLE rehearsal_messages (
  rehearsal_id text NOT NULL REFERENCES rehearsals (rehearsal_id) ON DELETE CASCADE,
  position     integer NOT NULL CHECK (position >= 0),
  message_id   text NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 1000),
  thread_id    text NOT NULL CHECK (char_length(thread_id) BETWEEN 1 AND 1000),
  received_at  timestamptz NOT NULL,
  PRIMARY KEY (rehearsal_id, position),
  UNIQUE (rehearsal_id, message_id)
);

-- One row per message rehearsed, claimed before the drafter is called and completed after, as the
-- operation store does (activities/operation-store/): a worker that dies mid-draft leaves a lease
-- that expires, and a stored result is replayed, so a message is drafted once per rehearsal.
CREATE TABLE rehearsal_results (
  rehearsal_id  text NOT NULL REFERENCES rehearsals (rehearsal_id) ON DELETE CASCADE,
  message_id    text NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 1000),
  -- rehearsal/<id>/<inbox>/<message>/outcome/v1 (contract/rehearsal.ts): never a live key's shape.
  operation_key text NOT NULL UNIQUE CHECK (operation_key LIKE 'rehearsal/%' AND char_length(operation_key) <= 2500),
  status        text NOT NULL CHECK (status IN ('processing', 'complete')),
  owner_token   text,
  lease_until   timestamptz,
  attempts      integer NOT NULL DEFAULT 1,
  outcome       text CHECK (outcome IN ('answered', 'handed-off', 'skipped', 'held', 'covered', 'model-failed', 'unreadable')),
  reason        text CHECK (char_length(reason) <= 200),
  -- The texts and figures: the customer's subject and words, the draft, its citations, the team's
  -- answer, tokens and time (activities/rehearsal/result.ts says what).
  result        jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (rehearsal_id, message_id),
  CHECK (status = 'processing' OR (outcome IS NOT NULL AND result IS NOT NULL))
);

-- Down Migration
DROP TABLE rehearsal_results;
DROP TABLE rehearsal_messages;
DROP TABLE rehearsals;

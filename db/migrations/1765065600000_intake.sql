-- Up Migration

-- The intake: one row per message handed to us, keyed by its workflow ID (the logical job).
-- The webhook inserts it in the same statement as its inbound_events row and answers once that
-- commits; catch-up inserts it in batches. A row with started_at NULL is a job whose workflow has
-- not been started yet: the process that accepted it starts it right after the commit, and the
-- intake relay (intake/relay.ts, in every API replica) starts whatever that left behind.
CREATE TABLE intake (
  workflow_id      text PRIMARY KEY CHECK (char_length(workflow_id) BETWEEN 1 AND 200),
  -- The deployment whose relay starts it (TEMPORAL_TASK_QUEUE): deployments sharing a database
  -- (and the test suite's many task queues) never start each other's jobs.
  task_queue       text NOT NULL CHECK (char_length(task_queue) BETWEEN 1 AND 200),
  inbox_id         text NOT NULL CHECK (char_length(inbox_id) BETWEEN 1 AND 320),
  message_id       text NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 998),
  thread_id        text CHECK (char_length(thread_id) BETWEEN 1 AND 998),
  -- The message's own time (the payload's message.timestamp, clamped when in the future).
  message_at       timestamptz,
  -- The webhook delivery that brought it first; NULL when a catch-up found it.
  first_event_id   text,
  accepted_at      timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_start_error text CHECK (char_length(last_start_error) <= 500),
  -- Not before this time may the relay try to start it: the accepting process's own start gets
  -- a head start, and a failed start backs off.
  next_attempt_at  timestamptz NOT NULL DEFAULT now()
);

-- The relay's scan: unstarted rows of one task queue, due first. Partial, so it holds only the
-- backlog (empty when all is well) however many started rows the table keeps.
CREATE INDEX intake_unstarted_idx ON intake (task_queue, next_attempt_at) WHERE started_at IS NULL;
-- Retention deletes started rows by age, oldest first.
CREATE INDEX intake_started_at_idx ON intake (started_at) WHERE started_at IS NOT NULL;

-- inbox_cursors are pruned when an inbox has not been seen for OPERATION_RETENTION_DAYS.
CREATE INDEX inbox_cursors_newest_message_at_idx ON inbox_cursors (newest_message_at);

-- Down Migration
DROP INDEX inbox_cursors_newest_message_at_idx;
DROP TABLE intake;

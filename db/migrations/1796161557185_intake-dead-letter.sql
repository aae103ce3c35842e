-- Up Migration

-- The intake relay's dead letter (intake/relay.ts). A row whose start Temporal keeps refusing
-- (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, …) or that has waited longer than a day is set aside:
-- `dead_at` is set, the relay no longer tries it, replyonce_intake_backlog{state="dead"} counts
-- it and `npm run replay -- --stuck` lists it; `npm run replay -- --retry-stuck` gives it back.
-- `refusals` counts the starts Temporal answered with a refusal: a start that failed because
-- Temporal was unreachable is an outage, not the row's fault, and counts only against the time.
-- `retried_at`: an operator's retry, from which the day is counted again.
-- last_start_error keeps only the last error's class from now on (a gRPC status name or an
-- error's name), never a message.
ALTER TABLE intake
  ADD COLUMN refusals integer NOT NULL DEFAULT 0 CHECK (refusals >= 0),
  ADD COLUMN dead_at timestamptz,
  ADD COLUMN retried_at timestamptz;

-- The relay's scan skips dead rows; the dead letter is listed from this one.
CREATE INDEX intake_dead_idx ON intake (task_queue, dead_at) WHERE started_at IS NULL AND dead_at IS NOT NULL;

-- Down Migration
DROP INDEX intake_dead_idx;
ALTER TABLE intake DROP COLUMN retried_at, DROP COLUMN dead_at, DROP COLUMN refusals;

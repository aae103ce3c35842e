-- Up Migration

-- Per inbox, the newest message time we have handed to a workflow: a catch-up replay without
-- --since resumes from here. Advanced by the ingress (accepted message.received events) and by
-- replays, always to the newer of the two (events arrive in any order), from the message's own
-- timestamp, never the arrival time.
CREATE TABLE inbox_cursors (
  inbox_id          text PRIMARY KEY CHECK (char_length(inbox_id) BETWEEN 1 AND 320),
  newest_message_at timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Retention prunes by age in bounded batches; these keep each batch an index range scan.
CREATE INDEX operations_updated_at_idx ON operations (updated_at);
CREATE INDEX sent_replies_sent_at_idx ON sent_replies (sent_at);

-- Down Migration
DROP INDEX sent_replies_sent_at_idx;
DROP INDEX operations_updated_at_idx;
DROP TABLE inbox_cursors;

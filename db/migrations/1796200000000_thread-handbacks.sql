-- Up Migration
-- A person handed a thread back to the agent (issue #34): a teammate's answer in the thread stops
-- automatic replies to it, until a row here is newer than that answer (activities/turns/person-answering.ts).
CREATE TABLE thread_handbacks (
  id              bigserial PRIMARY KEY,
  inbox_id        text NOT NULL CHECK (char_length(inbox_id) BETWEEN 1 AND 1000),
  thread_id       text NOT NULL CHECK (char_length(thread_id) BETWEEN 1 AND 1000),
  handed_back_by  text NOT NULL CHECK (char_length(handed_back_by) BETWEEN 1 AND 200),
  handed_back_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX thread_handbacks_thread_idx ON thread_handbacks (inbox_id, thread_id, handed_back_at);

-- Down Migration
DROP TABLE thread_handbacks;

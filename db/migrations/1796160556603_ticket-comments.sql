-- Up Migration
-- Conversations: one ticket per thread (its operation key derives from inbox + thread), and each
-- later inbound message, our reply and a skipped message's reason a comment on it, each under its
-- own operation key (the comment's primary key, so a retry never adds one twice). Ids and our own
-- notes only: the texts live at AgentMail and in the operation store.
CREATE TABLE ticket_comments (
  comment_key text PRIMARY KEY CHECK (char_length(comment_key) <= 1000),
  ticket_id   text NOT NULL REFERENCES tickets (ticket_id) ON DELETE CASCADE,
  kind        text NOT NULL CHECK (kind IN ('inbound', 'reply', 'note')),
  public      boolean NOT NULL,
  message_id  text NOT NULL,
  note        text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ticket_comments_ticket_idx ON ticket_comments (ticket_id, created_at);
-- A thread's ticket is found by its thread as well as by its key.
CREATE INDEX tickets_thread_idx ON tickets (inbox_id, thread_id);

-- Down Migration
DROP INDEX tickets_thread_idx;
DROP TABLE ticket_comments;

-- Up Migration

-- Conversations (issue #34, docs/conversations.md): a thread's turn is a row. A message takes it, and
-- gives it back, in a transaction that holds the row's lock, so a thread has one holder however many
-- workers ask at once, and nothing of the queue lives in a workflow an operator could terminate.
-- `state` is the rule's own state for the thread (workflows/turns/state.ts): its holder, who waits,
-- and the answers given lately. Ids, times and hashes only, never text or addresses.
CREATE TABLE thread_turns (
  thread_key text PRIMARY KEY,
  state jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Down Migration

DROP TABLE thread_turns;

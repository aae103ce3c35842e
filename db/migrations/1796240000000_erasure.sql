-- Up Migration

-- Erasure (issue 36, privacy/): forgetting a customer without ever answering them again by mistake.

-- An erased operation stays a row: its key, kind, status and this time, with its result replaced by
-- {"erased": true} and its failure's message dropped. A claim of it (a late webhook, a catch-up, a
-- rerun) answers `Erased` and runs nothing (activities/operation-store/store.ts).
ALTER TABLE operations ADD COLUMN erased_at timestamptz;
-- When the attempt that owns the row began its effect (an email, a ticket, a notification): an
-- erasure waits for an effect under way to finish rather than race it, and an effect never begins
-- once the row is erased (the same row, one statement each: whichever commits first wins).
ALTER TABLE operations ADD COLUMN effect_started_at timestamptz;
-- Retention keeps tombstones; this keeps its scan of the rest an index range scan.
CREATE INDEX operations_erased_idx ON operations (erased_at) WHERE erased_at IS NOT NULL;

-- The receipt of each erasure: what was erased, where, when, by whom, what could not be and why.
-- Ids, counts and hashes only: never the erased content, never the address (its mailbox's sha256).
-- `erasure_id` derives from the mailbox and the inboxes asked for, so the same erasure run twice
-- finds its first receipt. `plan` is the list of messages found (ids), written before anything is
-- erased, so a run killed half-way is completed by the next from the same list.
CREATE TABLE erasures (
  erasure_id    text PRIMARY KEY CHECK (char_length(erasure_id) = 64),
  mailbox_hash  text NOT NULL CHECK (char_length(mailbox_hash) = 64),
  inboxes       text[],
  requested_by  text NOT NULL CHECK (char_length(requested_by) BETWEEN 1 AND 200),
  block         boolean NOT NULL DEFAULT false,
  started_at    timestamptz NOT NULL DEFAULT now(),
  completed_at  timestamptz,
  plan          jsonb,
  receipt       jsonb
);

-- One row per erased message: the prefix of its operation keys (`<inbox>/<message>/`) and its
-- workflow ID. The operation store refuses every key under an erased prefix, a row or not, and the
-- intake refuses the workflow ID, for as long as these rows are kept (retention never prunes them:
-- they are ids, and dedupe needs them as long as AgentMail or a replay could bring the message back).
CREATE TABLE erased_messages (
  key_prefix   text PRIMARY KEY CHECK (char_length(key_prefix) BETWEEN 1 AND 1000),
  workflow_id  text NOT NULL CHECK (char_length(workflow_id) BETWEEN 1 AND 200),
  inbox_id     text NOT NULL CHECK (char_length(inbox_id) BETWEEN 1 AND 320),
  message_id   text NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 998),
  thread_id    text,
  erasure_id   text NOT NULL REFERENCES erasures (erasure_id),
  erased_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX erased_messages_workflow_idx ON erased_messages (workflow_id);

-- `--block`: a mailbox whose new messages are held for a person (skipped, with a ticket), by the
-- sha256 of its mailbox (activities/agentmail/mailbox.ts), never the address.
CREATE TABLE blocked_mailboxes (
  mailbox_hash text PRIMARY KEY CHECK (char_length(mailbox_hash) = 64),
  erasure_id   text REFERENCES erasures (erasure_id),
  blocked_at   timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE blocked_mailboxes;
DROP TABLE erased_messages;
DROP TABLE erasures;
DROP INDEX operations_erased_idx;
ALTER TABLE operations DROP COLUMN effect_started_at;
ALTER TABLE operations DROP COLUMN erased_at;

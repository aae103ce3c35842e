-- Up Migration

-- One row per webhook delivery we accepted (its event_id is the sender's dedupe key).
-- Recorded only after Temporal acknowledged the workflow start, so a row here means
-- "this notification has been handed to a workflow"; a retry of a failed start finds no row.
-- Pruned after 7 days: AgentMail retries for about 27.5 hours.
CREATE TABLE inbound_events (
  event_id     text PRIMARY KEY CHECK (char_length(event_id) BETWEEN 1 AND 255),
  event_type   text NOT NULL CHECK (char_length(event_type) BETWEEN 1 AND 100),
  inbox_id     text,
  message_id   text,
  workflow_id  text,
  outcome      text NOT NULL CHECK (outcome IN ('queued', 'duplicate', 'ignored')),
  received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbound_events_received_at_idx ON inbound_events (received_at);

-- The operation store: one row per business effect, keyed by its operation key.
-- See DESIGN.md "The operation store" for the claim protocol this table supports.
CREATE TABLE operations (
  operation_key    text PRIMARY KEY CHECK (char_length(operation_key) BETWEEN 1 AND 1000),
  kind             text NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 50),
  request_hash     text NOT NULL CHECK (char_length(request_hash) = 64),
  status           text NOT NULL CHECK (status IN ('processing', 'complete', 'failed')),
  result           jsonb,
  error            jsonb,
  owner_token      text,
  lease_until      timestamptz,
  attempts         integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
  -- When the effect was first attempted: the send uses it to know when the provider's
  -- idempotency key may have expired (AgentMail keeps keys 24 h after completion).
  first_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  CHECK (status <> 'complete' OR result IS NOT NULL),
  CHECK (status <> 'failed' OR error IS NOT NULL)
);
CREATE INDEX operations_kind_status_idx ON operations (kind, status, updated_at);

-- The default ticket provider: tickets kept in Postgres. The operation key is the
-- provider-side idempotency key (like an external id at a real help desk).
CREATE TABLE tickets (
  ticket_id     text PRIMARY KEY,
  operation_key text NOT NULL UNIQUE,
  inbox_id      text NOT NULL,
  message_id    text NOT NULL,
  thread_id     text,
  subject       text,
  status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'pending', 'closed')),
  note          text,
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- Replies sent, per recipient, for the per-sender reply budget (loop safety).
-- Keyed by the reply's operation key so a replayed send is counted once.
CREATE TABLE sent_replies (
  operation_key   text PRIMARY KEY,
  inbox_id        text NOT NULL,
  recipient_hash  text NOT NULL CHECK (char_length(recipient_hash) = 64),
  sent_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sent_replies_recipient_idx ON sent_replies (recipient_hash, sent_at);

-- Down Migration
DROP TABLE sent_replies;
DROP TABLE tickets;
DROP TABLE operations;
DROP TABLE inbound_events;

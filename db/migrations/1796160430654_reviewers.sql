-- Up Migration

-- Reviewers are people (issue 22): each has their own credential, a bearer token `rvw_…` shown
-- once when it is made (`npm run reviewer -- add`) and kept here only as its sha256. A verdict
-- records the reviewer from the credential that sent it, never from a request body. Revoking
-- sets revoked_at; the row stays, so the audit keeps naming who it was. Owned by review/reviewers.ts.
CREATE TABLE reviewers (
  id          text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 100),
  name        text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  token_hash  text NOT NULL UNIQUE CHECK (char_length(token_hash) = 64),
  -- The inboxes this reviewer may judge; NULL: every inbox.
  inboxes     text[],
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);

-- Who approved this email, which revision, when: one row per accepted verdict, written by the
-- activity that records it (activities/draft/approval.ts). One verdict per message, so a
-- retried record is the same row. Owned by review/audit.ts.
CREATE TABLE review_audit (
  workflow_id  text PRIMARY KEY CHECK (char_length(workflow_id) BETWEEN 1 AND 200),
  inbox_id     text NOT NULL CHECK (char_length(inbox_id) BETWEEN 1 AND 320),
  message_id   text NOT NULL CHECK (char_length(message_id) BETWEEN 1 AND 998),
  verdict      text NOT NULL CHECK (verdict IN ('approve', 'reject')),
  revision     integer NOT NULL CHECK (revision >= 1),
  edited       boolean NOT NULL DEFAULT false,
  reviewer_id  text NOT NULL CHECK (char_length(reviewer_id) BETWEEN 1 AND 100),
  at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_audit_reviewer_idx ON review_audit (reviewer_id, at);

-- Down Migration
DROP TABLE review_audit;
DROP TABLE reviewers;

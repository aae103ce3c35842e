-- Up Migration

-- The review desk's sign-ins (issue 20, desk/sessions.ts). One row per signed-in browser: the
-- cookie holds a random session id, the table only its sha256, so a leaked table signs no one in.
-- A session ends at expires_at, at sign-out (the row deleted), or as soon as its reviewer is
-- revoked (every request joins the reviewers table and finds revoked_at set). No foreign key to
-- reviewers: that table belongs to review/ and its migration may sort before or after this one.
CREATE TABLE desk_sessions (
  session_hash text PRIMARY KEY CHECK (char_length(session_hash) = 64),
  reviewer_id text NOT NULL CHECK (char_length(reviewer_id) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX desk_sessions_reviewer_idx ON desk_sessions (reviewer_id);
CREATE INDEX desk_sessions_expires_at_idx ON desk_sessions (expires_at);

-- Down Migration
DROP TABLE desk_sessions;

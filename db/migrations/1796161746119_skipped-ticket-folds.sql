-- Up Migration

-- Tickets for skipped mail, bounded per inbox (issue 18 point 4): one row per skipped message
-- whose ticket was considered, keyed by that message's ticket operation key. `opened`: it opened a
-- ticket of its own; otherwise `folded_into` names the ticket key of the open ticket it was
-- counted on. Ids and keys only. Owned by activities/ticket/skipped-fold.ts.
CREATE TABLE skipped_ticket_folds (
  ticket_key text PRIMARY KEY CHECK (char_length(ticket_key) BETWEEN 1 AND 1100),
  inbox_id text NOT NULL,
  reason text NOT NULL,
  opened boolean NOT NULL,
  folded_into text,
  at timestamptz NOT NULL DEFAULT now(),
  CHECK (opened = (folded_into IS NULL))
);
-- The open ticket of an inbox's window, and the count on it.
CREATE INDEX skipped_ticket_folds_opened_idx ON skipped_ticket_folds (inbox_id, at) WHERE opened;
CREATE INDEX skipped_ticket_folds_into_idx ON skipped_ticket_folds (folded_into) WHERE folded_into IS NOT NULL;

-- Down Migration
DROP TABLE skipped_ticket_folds;

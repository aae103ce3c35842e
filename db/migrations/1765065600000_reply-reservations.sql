-- Up Migration

-- The per-sender reply budget becomes reservations made when the decision is taken (issue 13):
-- one row per reply we have decided to send, keyed by the message's reply (its v1 operation key),
-- so a replayed decision finds its own row instead of reserving twice. A reply that is not sent
-- (rejected, failed before its send) is released: released_at set, no longer counted; a replayed
-- decision to reply takes its row back. Owned by activities/reply-budget.ts.
--
-- Renamed rather than replaced: the rows of the last 24 h keep counting across the upgrade (a
-- sender who had 5 replies before it still has 5), and one table keeps one meaning.
ALTER TABLE sent_replies RENAME TO reply_reservations;
ALTER TABLE reply_reservations RENAME COLUMN operation_key TO reply_key;
ALTER TABLE reply_reservations RENAME COLUMN sent_at TO reserved_at;
ALTER TABLE reply_reservations ADD COLUMN released_at timestamptz;
-- Who wrote to us, beside whom we write to: the budget counts replies involving an address either
-- way (NULL on rows from before, which were all to the sender).
ALTER TABLE reply_reservations ADD COLUMN sender_hash text CHECK (char_length(sender_hash) = 64);
ALTER TABLE reply_reservations ADD CONSTRAINT reply_reservations_reply_key_length
  CHECK (char_length(reply_key) BETWEEN 1 AND 1100);
ALTER INDEX sent_replies_pkey RENAME TO reply_reservations_pkey;
ALTER INDEX sent_replies_recipient_idx RENAME TO reply_reservations_recipient_idx;
ALTER INDEX sent_replies_sent_at_idx RENAME TO reply_reservations_reserved_at_idx;
-- The per-inbox ceiling counts an inbox's reservations of the last hour.
CREATE INDEX reply_reservations_inbox_idx ON reply_reservations (inbox_id, reserved_at);
CREATE INDEX reply_reservations_sender_idx ON reply_reservations (sender_hash, reserved_at);

-- Down Migration
DROP INDEX reply_reservations_sender_idx;
DROP INDEX reply_reservations_inbox_idx;
ALTER INDEX reply_reservations_reserved_at_idx RENAME TO sent_replies_sent_at_idx;
ALTER INDEX reply_reservations_recipient_idx RENAME TO sent_replies_recipient_idx;
ALTER INDEX reply_reservations_pkey RENAME TO sent_replies_pkey;
ALTER TABLE reply_reservations DROP CONSTRAINT reply_reservations_reply_key_length;
DELETE FROM reply_reservations WHERE released_at IS NOT NULL;
ALTER TABLE reply_reservations DROP COLUMN released_at;
ALTER TABLE reply_reservations DROP COLUMN sender_hash;
ALTER TABLE reply_reservations RENAME COLUMN reserved_at TO sent_at;
ALTER TABLE reply_reservations RENAME COLUMN reply_key TO operation_key;
ALTER TABLE reply_reservations RENAME TO sent_replies;

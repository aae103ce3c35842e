import type { Db } from '../../lib/db';
import { addressHash } from '../../lib/hashing';
import { mailboxOf } from '../agentmail/mailbox';

/**
 * Mailboxes an operator blocked when erasing them (`npm run forget -- --block`, privacy/erase.ts):
 * their new messages are not answered automatically but held for a person (`blocked-sender`,
 * always a ticket). Stored and looked up as the mailbox's sha256, like the reply budget's.
 */
export async function isBlockedSender(db: Db, sender: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM blocked_mailboxes WHERE mailbox_hash = $1', [
    addressHash(mailboxOf(sender)),
  ]);
  return (rowCount ?? 0) > 0;
}

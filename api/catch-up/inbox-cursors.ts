import type { Db } from '../../lib/db';

/**
 * `inbox_cursors`: per inbox, the newest message time handed to a workflow. Events and replays
 * arrive in any order, so the cursor only ever moves to the newer time (GREATEST), and a write
 * that would not move it is skipped (no dead row version for every older message).
 */

/**
 * The upsert, with its parameters named by the caller: the ingress folds it into its event
 * insert as one statement (one round trip on the hot path).
 */
export const advanceCursorSql = (inboxParam: string, atParam: string): string =>
  `INSERT INTO inbox_cursors (inbox_id, newest_message_at) VALUES (${inboxParam}, ${atParam})
   ON CONFLICT (inbox_id) DO UPDATE
     SET newest_message_at = GREATEST(inbox_cursors.newest_message_at, EXCLUDED.newest_message_at), updated_at = now()
     WHERE inbox_cursors.newest_message_at < EXCLUDED.newest_message_at`;

export interface InboxCursor {
  inboxId: string;
  newestMessageAt: Date;
}

export class InboxCursors {
  constructor(private readonly db: Db) {}

  async get(inboxId: string): Promise<Date | undefined> {
    const { rows } = await this.db.query<{ newest_message_at: Date }>(
      'SELECT newest_message_at FROM inbox_cursors WHERE inbox_id = $1',
      [inboxId],
    );
    return rows[0]?.newest_message_at;
  }

  async advance(inboxId: string, newestMessageAt: Date): Promise<void> {
    await this.db.query(advanceCursorSql('$1', '$2'), [inboxId, newestMessageAt]);
  }

  async list(): Promise<InboxCursor[]> {
    const { rows } = await this.db.query<{ inbox_id: string; newest_message_at: Date }>(
      'SELECT inbox_id, newest_message_at FROM inbox_cursors ORDER BY inbox_id',
    );
    return rows.map((row) => ({ inboxId: row.inbox_id, newestMessageAt: row.newest_message_at }));
  }
}

import type { Db } from '../lib/db';

/**
 * `inbox_cursors`: per inbox, the newest message time handed over (an intake row committed). Events and replays
 * arrive in any order, so the cursor only ever moves to the newer time (GREATEST), and a write
 * that would not move it is skipped (no dead row version for every older message).
 */

/**
 * The upsert, fed by a row source (`VALUES (…)` or a `SELECT … WHERE` that yields no row for an
 * unknown time): the intake folds it into its own statement (one round trip on the hot path).
 * Times reach it clamped (intake/message-time.ts), so a year-9999 claim cannot move it for good.
 */
export const advanceCursorSql = (rows: string): string =>
  `INSERT INTO inbox_cursors (inbox_id, newest_message_at) ${rows}
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
    await this.db.query(advanceCursorSql('VALUES ($1, $2)'), [inboxId, newestMessageAt]);
  }

  async list(): Promise<InboxCursor[]> {
    const { rows } = await this.db.query<{ inbox_id: string; newest_message_at: Date }>(
      'SELECT inbox_id, newest_message_at FROM inbox_cursors ORDER BY inbox_id',
    );
    return rows.map((row) => ({ inboxId: row.inbox_id, newestMessageAt: row.newest_message_at }));
  }
}

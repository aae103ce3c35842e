import { type Db, inTransaction } from '../../lib/db';
import { emptyTurns, type Tell, type ThreadTurns } from './rule';

/**
 * A thread's turns live in one Postgres row (`thread_turns`). Every change takes the row's lock, reads
 * the state, applies the rule (rule.ts) and writes it back in one transaction: two
 * workers asking for one thread at once take their turns one after the other, and a crash before the
 * commit changes nothing. Returns the answers the change decided, for the caller to tell.
 */
export async function changeTurns(
  db: Db,
  threadKey: string,
  change: (thread: ThreadTurns, now: number) => Tell[],
): Promise<{ tells: Tell[]; thread: ThreadTurns }> {
  return inTransaction(db, async (client) => {
    // The upsert takes the row's lock whether it made the row or found it (ON CONFLICT DO UPDATE
    // locks the row it conflicts with), so the read and the write below see no one in between.
    const { rows } = await client.query<{ state: ThreadTurns }>(
      `INSERT INTO thread_turns (thread_key, state) VALUES ($1, $2)
       ON CONFLICT (thread_key) DO UPDATE SET thread_key = EXCLUDED.thread_key
       RETURNING state`,
      [threadKey, emptyTurns()],
    );
    const thread = rows[0]!.state;
    const tells = change(thread, Date.now());
    await client.query(`UPDATE thread_turns SET state = $2, updated_at = now() WHERE thread_key = $1`, [
      threadKey,
      thread,
    ]);
    return { tells, thread };
  });
}

/** A thread's turns as they stand (no lock), or null when no message of it asked lately: for an operator and the tests. */
export async function readTurns(db: Db, threadKey: string): Promise<ThreadTurns | null> {
  const { rows } = await db.query<{ state: ThreadTurns }>(`SELECT state FROM thread_turns WHERE thread_key = $1`, [
    threadKey,
  ]);
  return rows[0]?.state ?? null;
}

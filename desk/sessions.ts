import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../lib/db';
import type { Reviewer } from '../review/reviewers';

/**
 * The desk's sign-ins, in Postgres (table desk_sessions). The browser's cookie holds a random
 * session id (32 bytes, base64url); the table holds its sha256 only. Every request looks its
 * session up joined with its reviewer, so a reviewer revoked a moment ago is signed out at the
 * next request, and an expired session is gone at its expiry whatever the cookie says.
 */

export type SignedIn = Pick<Reviewer, 'id' | 'name' | 'inboxes'>;

const sessionHash = (id: string) => createHash('sha256').update(id, 'utf8').digest('hex');

export class DeskSessions {
  constructor(
    private readonly db: Db,
    private readonly ttlMs: number,
  ) {}

  /** A new session for `reviewerId`; the id goes into the cookie, never anywhere else. */
  async create(reviewerId: string): Promise<{ id: string; expiresAt: Date }> {
    const id = randomBytes(32).toString('base64url');
    const { rows } = await this.db.query<{ expires_at: Date }>(
      `INSERT INTO desk_sessions (session_hash, reviewer_id, expires_at)
       VALUES ($1, $2, now() + make_interval(secs => $3::double precision / 1000))
       RETURNING expires_at`,
      [sessionHash(id), reviewerId, this.ttlMs],
    );
    // Expired rows of anyone are cleared as sign-ins happen: the table stays the size of the live sessions.
    await this.db.query('DELETE FROM desk_sessions WHERE expires_at < now()');
    return { id, expiresAt: (rows[0] as { expires_at: Date }).expires_at };
  }

  /** The signed-in reviewer, or null: no such session, expired, or its reviewer revoked (then it is deleted). */
  async find(id: string): Promise<SignedIn | null> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return null;
    const { rows } = await this.db.query<{
      id: string | null;
      name: string;
      inboxes: string[] | null;
      live: boolean;
    }>(
      `SELECT r.id, r.name, r.inboxes, (s.expires_at > now() AND r.id IS NOT NULL AND r.revoked_at IS NULL) AS live
         FROM desk_sessions s LEFT JOIN reviewers r ON r.id = s.reviewer_id
        WHERE s.session_hash = $1`,
      [sessionHash(id)],
    );
    const row = rows[0];
    if (row === undefined) return null;
    if (!row.live || row.id === null) {
      await this.end(id);
      return null;
    }
    return { id: row.id, name: row.name, inboxes: row.inboxes };
  }

  async end(id: string): Promise<void> {
    await this.db.query('DELETE FROM desk_sessions WHERE session_hash = $1', [sessionHash(id)]);
  }
}

export { mayReview } from '../review/reviewers';

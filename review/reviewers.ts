import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../lib/db';

/**
 * Reviewers are people: each has a credential of their own, a bearer token made here and shown
 * once. Postgres keeps only its sha256, so a copy of the database approves nothing. A verdict is
 * recorded under the reviewer this module returns for the token that sent it — never under a name
 * from a request body. `npm run reviewer -- add|list|revoke` (scripts/reviewer.ts) manages them.
 */

export interface Reviewer {
  id: string;
  name: string;
  /** The inboxes this reviewer may judge; null: every inbox. */
  inboxes: string[] | null;
  createdAt: Date;
  revokedAt: Date | null;
}

/** Every token starts so: a secret scanner (and a person) can tell one from other secrets. */
export const REVIEWER_TOKEN_PREFIX = 'rvw_';
/** 32 random bytes: 256 bits, guessed never. */
const TOKEN_BYTES = 32;

export const reviewerTokenHash = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

/** Whether a string has the shape of a reviewer token (a cheap refusal before any query). */
export const looksLikeReviewerToken = (token: string): boolean => /^rvw_[A-Za-z0-9_-]{43}$/.test(token);

interface ReviewerRow {
  id: string;
  name: string;
  inboxes: string[] | null;
  created_at: Date;
  revoked_at: Date | null;
}

const fromRow = (row: ReviewerRow): Reviewer => ({
  id: row.id,
  name: row.name,
  inboxes: row.inboxes,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
});

export class ReviewerInputError extends Error {
  override name = 'ReviewerInputError';
}

/** Makes a reviewer and their token. The token is returned once and never stored: hand it over now. */
export async function addReviewer(
  db: Db,
  input: { name: string; inboxes?: string[] | null },
): Promise<{ reviewer: Reviewer; token: string }> {
  const name = input.name.trim();
  if (name === '' || name.length > 200) throw new ReviewerInputError('a reviewer needs a name of 1 to 200 characters');
  const inboxes = input.inboxes?.map((inbox) => inbox.trim().toLowerCase()) ?? null;
  // `--inbox ""` (an unset shell variable) names no inbox; left to fall through it would store
  // "every inbox", the widest grant there is. Only leaving --inbox out means every inbox.
  if (inboxes !== null && (inboxes.length === 0 || inboxes.includes('')))
    throw new ReviewerInputError(
      'an --inbox was empty (an unset shell variable?): name the inbox this reviewer may judge, or leave --inbox out for every inbox',
    );
  const token = `${REVIEWER_TOKEN_PREFIX}${randomBytes(TOKEN_BYTES).toString('base64url')}`;
  const id = `rv_${randomBytes(6).toString('hex')}`;
  const { rows } = await db.query<ReviewerRow>(
    `INSERT INTO reviewers (id, name, token_hash, inboxes) VALUES ($1, $2, $3, $4)
     RETURNING id, name, inboxes, created_at, revoked_at`,
    [id, name, reviewerTokenHash(token), inboxes],
  );
  return { reviewer: fromRow(rows[0] as ReviewerRow), token };
}

/** Every reviewer, revoked ones included (the audit still names them), oldest first. */
export async function listReviewers(db: Db): Promise<Reviewer[]> {
  const { rows } = await db.query<ReviewerRow>(
    'SELECT id, name, inboxes, created_at, revoked_at FROM reviewers ORDER BY created_at, id',
  );
  return rows.map(fromRow);
}

/** Revokes a reviewer's token from now on; the answer is the reviewer, or null when there is no such id. Idempotent. */
export async function revokeReviewer(db: Db, id: string): Promise<Reviewer | null> {
  const { rows } = await db.query<ReviewerRow>(
    `UPDATE reviewers SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1
     RETURNING id, name, inboxes, created_at, revoked_at`,
    [id],
  );
  return rows[0] ? fromRow(rows[0]) : null;
}

/** The reviewer a token belongs to, or null when it is unknown, malformed or revoked. */
export async function authenticateReviewer(db: Db, token: string): Promise<Reviewer | null> {
  if (!looksLikeReviewerToken(token)) return null;
  const { rows } = await db.query<ReviewerRow>(
    `SELECT id, name, inboxes, created_at, revoked_at FROM reviewers
     WHERE token_hash = $1 AND revoked_at IS NULL`,
    [reviewerTokenHash(token)],
  );
  return rows[0] ? fromRow(rows[0]) : null;
}

/** Whether this reviewer may judge mail of that inbox. */
export const mayReview = (reviewer: Pick<Reviewer, 'inboxes'>, inboxId: string): boolean =>
  reviewer.inboxes === null || reviewer.inboxes.includes(inboxId.trim().toLowerCase());

/**
 * Whether anybody may review this inbox's mail now (a reviewer who is not revoked, of every inbox
 * or of this one): where a hand-off goes by default. A reviewer of other inboxes does not count —
 * a hand-off waiting for them would wait unseen (the desk shows it to nobody).
 */
export async function anyActiveReviewerFor(db: Pick<Db, 'query'>, inboxId: string): Promise<boolean> {
  const { rows } = await db.query<{ any: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM reviewers WHERE revoked_at IS NULL AND (inboxes IS NULL OR $1 = ANY (inboxes))
     ) AS any`,
    [inboxId.trim().toLowerCase()],
  );
  return rows[0]?.any ?? false;
}

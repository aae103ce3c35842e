import { createDb } from '../../lib/db';
import { addReviewer, listReviewers } from '../../review/reviewers';

/**
 * The review desk's first sign-in for `npm run dev` and `npm run stack`: when no reviewer exists
 * yet, one is made and its token returned, to be printed once in the banner (only its hash is
 * kept). Later starts find a reviewer and return null: `npm run reviewer -- add` makes more.
 */
export async function firstReviewerToken(databaseUrl: string): Promise<string | null> {
  const db = createDb(databaseUrl, { max: 1 });
  try {
    if ((await listReviewers(db)).length > 0) return null;
    return (await addReviewer(db, { name: 'First reviewer' })).token;
  } finally {
    await db.end();
  }
}

/**
 * The banner's lines for the desk. `databaseUrl` is the stack's own database when it is not the one
 * `npm run reviewer` finds by itself, so the printed command works as printed.
 */
export function deskBannerLines(
  url: string,
  token: string | null,
  label = '  Review desk   ',
  databaseUrl?: string,
): string[] {
  const add = `${databaseUrl ? `DATABASE_URL='${databaseUrl}' ` : ''}npm run reviewer -- add --name "New reviewer"`;
  return [
    `${label}${url}`,
    token
      ? `${' '.repeat(label.length)}sign in with this reviewer token (shown once, only its hash is kept): ${token}`
      : `${' '.repeat(label.length)}reviewers exist already; ${add} makes a token`,
  ];
}

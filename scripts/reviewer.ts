// Reviewers' credentials and the audit of their verdicts. Each reviewer is a person with a token of
// their own (`Authorization: Bearer rvw_…` on POST /admin/review); the token is printed once, at
// `add`, and stored only as its sha256.
//
//   npm run reviewer -- add --name "Ana Lima" [--inbox support@example.com …]   (no --inbox: every inbox)
//   npm run reviewer -- list
//   npm run reviewer -- revoke <reviewer id>
//   npm run reviewer -- audit [<workflow id> | --inbox <inbox id> --message <message id>]
//   … --dev                                   (against the `npm run dev` stack's database)
//
// Reads DATABASE_URL.
import { parseArgs } from 'node:util';
import { inboundWorkflowId } from '../lib/hashing';
import { createDb } from '../lib/db';
import { listReviewAudit } from '../review/audit';
import { addReviewer, listReviewers, revokeReviewer, type Reviewer } from '../review/reviewers';
import { runMain, SetupError } from './services/main';
import { DEFAULT_DEV_DATABASE_URL } from './services/postgres';

const USAGE = [
  'usage: npm run reviewer -- add --name <name> [--inbox <inbox id> …]',
  '       npm run reviewer -- list',
  '       npm run reviewer -- revoke <reviewer id>',
  '       npm run reviewer -- audit [<workflow id> | --inbox <inbox id> --message <message id>]',
  '       (each with --dev for the `npm run dev` stack; otherwise DATABASE_URL)',
].join('\n');

const describe = (r: Reviewer) =>
  `${r.id}  ${r.name}  inboxes: ${r.inboxes === null ? 'all' : r.inboxes.join(', ')}  created ${r.createdAt.toISOString()}${
    r.revokedAt ? `  REVOKED ${r.revokedAt.toISOString()}` : ''
  }`;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      name: { type: 'string' },
      inbox: { type: 'string', multiple: true },
      message: { type: 'string' },
      dev: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: true,
    strict: true,
  });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    console.log(USAGE);
    return values.help ? 0 : 1;
  }
  const databaseUrl = process.env.DATABASE_URL || (values.dev ? DEFAULT_DEV_DATABASE_URL : undefined);
  if (!databaseUrl) throw new SetupError(`DATABASE_URL is required (or --dev)\n${USAGE}`);
  const db = createDb(databaseUrl, { max: 1 });
  try {
    switch (command) {
      case 'add': {
        if (!values.name) throw new SetupError(`add needs --name\n${USAGE}`);
        const { reviewer, token } = await addReviewer(db, { name: values.name, inboxes: values.inbox ?? null });
        console.log(describe(reviewer));
        console.log(`token (shown once; give it to ${reviewer.name} and keep no copy): ${token}`);
        return 0;
      }
      case 'list': {
        const reviewers = await listReviewers(db);
        if (reviewers.length === 0) console.log('no reviewers yet: add one with `npm run reviewer -- add --name …`');
        for (const reviewer of reviewers) console.log(describe(reviewer));
        return 0;
      }
      case 'revoke': {
        const [id] = rest;
        if (id === undefined) throw new SetupError(`revoke needs a reviewer id\n${USAGE}`);
        const reviewer = await revokeReviewer(db, id);
        if (!reviewer) throw new SetupError(`no reviewer ${id} (see \`npm run reviewer -- list\`)`);
        console.log(`revoked: ${describe(reviewer)}`);
        return 0;
      }
      case 'audit': {
        const inboxId = values.inbox?.[0];
        const workflowId =
          rest[0] ??
          (inboxId !== undefined && values.message !== undefined
            ? inboundWorkflowId({ inboxId, messageId: values.message })
            : undefined);
        const entries = await listReviewAudit(db, { workflowId });
        if (entries.length === 0) console.log(workflowId ? `no verdict recorded for ${workflowId}` : 'no verdicts yet');
        for (const e of entries)
          console.log(
            `${e.at.toISOString()}  ${e.workflowId}  ${e.verdict}${e.edited ? ' (edited)' : ''}  revision ${e.revision}  by ${e.reviewerId}  (inbox ${e.inboxId})`,
          );
        return 0;
      }
      default:
        throw new SetupError(`unknown command ${command}\n${USAGE}`);
    }
  } finally {
    await db.end();
  }
}

runMain(main);

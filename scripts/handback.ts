// Hands a thread back to the agent after a person of the team answered in it (docs/conversations.md,
// "A person takes over"): the customer's next messages are answered automatically again.
//
//   npm run handback -- --inbox <inbox id> --thread <thread id> [--by <who>]
//   … --dev                                   (against the `npm run dev` stack's database)
//
// Reads DATABASE_URL. The desk's "let the agent answer this thread again" button calls the same function.
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import { handBackThread } from '../activities/turns/person-answering';
import { createDb } from '../lib/db';
import { runMain, SetupError } from './services/main';
import { DEFAULT_DEV_DATABASE_URL } from './services/postgres';

const USAGE =
  'usage: npm run handback -- --inbox <inbox id> --thread <thread id> [--by <who>] (--dev for the `npm run dev` stack; otherwise DATABASE_URL)';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      inbox: { type: 'string' },
      thread: { type: 'string' },
      by: { type: 'string' },
      dev: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!values.inbox || !values.thread) throw new SetupError(`--inbox and --thread are required\n${USAGE}`);
  const databaseUrl = process.env.DATABASE_URL || (values.dev ? DEFAULT_DEV_DATABASE_URL : undefined);
  if (!databaseUrl) throw new SetupError(`DATABASE_URL is required (or --dev)\n${USAGE}`);
  const db = createDb(databaseUrl, { max: 1 });
  try {
    const by = values.by ?? `cli:${userInfo().username}`;
    const { handedBackAt } = await handBackThread(db, { inboxId: values.inbox, threadId: values.thread, by });
    console.log(
      `thread ${values.thread} of ${values.inbox} handed back to the agent by ${by} at ${handedBackAt.toISOString()}`,
    );
    return 0;
  } finally {
    await db.end();
  }
}

runMain(main);

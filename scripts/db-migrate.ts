// Applies the SQL migrations in db/migrations/ with node-pg-migrate. Idempotent; safe to run from
// several processes at once (they queue on an advisory lock).
//
//   npm run db:migrate            DATABASE_URL
//
// Migration files: db/migrations/<timestamp>_<name>.sql, the timestamp being 13 digits (ms since
// the epoch, as `node-pg-migrate create` writes) or 17 (UTC yyyymmddhhmmssSSS), with the
// sections `-- Up Migration` and `-- Down Migration`. Files of any other type are ignored.
import path from 'node:path';
import { Client } from 'pg';
import { runner } from 'node-pg-migrate';
import { describeDatabaseUrl } from './services/postgres';
import { SetupError, messageOf, runMain } from './services/main';

export const MIGRATIONS_DIR = path.resolve(__dirname, '..', 'db', 'migrations');
export const MIGRATIONS_TABLE = 'pgmigrations';

/**
 * node-pg-migrate's own lock is a *try* lock: a second migrator fails with "Another migration is
 * already running". Ours waits instead, so two processes starting together both succeed.
 */
const MIGRATION_LOCK_KEY = 0x7265706c796f6e63n; // "replyonc"

export interface MigrateOptions {
  /** Defaults to db/migrations/. */
  dir?: string;
  /** Progress lines ("> Migrating files: …"); defaults to stderr. */
  log?: (message: string) => void;
}

/** Applies the pending migrations; returns the names it applied (none when up to date). */
export async function migrateDatabase(databaseUrl: string, options: MigrateOptions = {}): Promise<string[]> {
  const dir = options.dir ?? MIGRATIONS_DIR;
  // "No migrations to run!" is left to the caller, which has the list of what was applied.
  const log =
    options.log ?? ((message: string) => message.startsWith('No migrations') || console.error(`[db] ${message}`));
  const client = new Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (error) {
    throw new SetupError(
      `cannot connect to PostgreSQL at ${describeDatabaseUrl(databaseUrl)} (DATABASE_URL): ${messageOf(error)}`,
    );
  }
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY.toString()]);
    const applied = await runner({
      dbClient: client,
      dir,
      // Only *.sql (and never dotfiles): anything else in the folder would be require()d as code.
      ignorePattern: '(\\..*|.*(?<!\\.sql))',
      direction: 'up',
      migrationsTable: MIGRATIONS_TABLE,
      checkOrder: true,
      singleTransaction: true,
      logger: { debug: () => undefined, info: log, warn: log, error: log },
    });
    return applied.map((migration) => migration.name);
  } finally {
    await client.end();
  }
}

if (require.main === module) {
  runMain(async () => {
    const databaseUrl = process.env.DATABASE_URL;
    if (!databaseUrl)
      throw new SetupError('DATABASE_URL is not set (e.g. postgres://replyonce:replyonce@127.0.0.1:55432/replyonce)');
    const applied = await migrateDatabase(databaseUrl);
    console.error(
      `[db] ${describeDatabaseUrl(databaseUrl)}: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}`,
    );
  });
}

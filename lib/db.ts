import pg from 'pg';

export type Db = pg.Pool;

export interface DbOptions {
  /** How long one query may run; the ingress keeps this well inside AgentMail's 15 s window. */
  queryTimeoutMs?: number;
  /** How long to wait for a connection (a Postgres that is down must fail fast, not hang). */
  connectTimeoutMs?: number;
  max?: number;
  /** How long a session may sit idle inside a transaction before Postgres ends it (default 30 s). */
  idleInTransactionTimeoutMs?: number;
}

export function createDb(databaseUrl: string, options: DbOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 3_000,
    query_timeout: options.queryTimeoutMs ?? 10_000,
    statement_timeout: options.queryTimeoutMs ?? 10_000,
    // A session that stops talking inside a transaction (its process frozen, its network gone)
    // would keep its locks — the reply budget's advisory locks among them — until TCP noticed.
    // Postgres ends it instead; no transaction of ours waits on the client for anywhere near this.
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 30_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client losing its connection (Postgres restarted) must not crash the process:
  // the pool drops it and the next query reconnects.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A client of its own from the pool, for a transaction. While a client is checked out the pool
 * does not listen for its errors, and a connection that dies under it (Postgres restarted, the
 * network cut, the server ending an idle transaction) emits one: unheard, that error crashes the
 * process. The statement in flight rejects with the same error, so the caller hears it there;
 * this listener only keeps the event from being fatal. On release the pool drops a broken client.
 */
export async function checkOut(db: Db): Promise<pg.PoolClient> {
  const client = await db.connect();
  const heardByTheCaller = () => undefined;
  client.on('error', heardByTheCaller);
  const release = client.release.bind(client);
  client.release = (error?: Error | boolean) => {
    client.removeListener('error', heardByTheCaller);
    release(error);
  };
  return client;
}

/**
 * Runs `work` in one transaction on a checked-out client: COMMIT when it returns, ROLLBACK when it
 * throws (a rollback that fails too, on a connection already gone, leaves the first error to the
 * caller), and the client back to the pool either way. What must happen only once the work is
 * durable (a metric, a log line, a call out) goes after this returns, not inside `work`.
 */
export async function inTransaction<T>(db: Db, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await checkOut(db);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** host:port/database of a DATABASE_URL, for messages: never the user or the password. */
export function describeDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return '(an unparseable URL)';
  }
}

/**
 * A wrong user or password, said as such: `authentication failed for user <name>` (Postgres's
 * 28P01 / 28000), or null for any other error. It is not an unreachable host, and needs no stack.
 */
export function postgresAuthenticationFailure(error: unknown): string | null {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (typeof current === 'object' && current !== null && !seen.has(current)) {
    seen.add(current);
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (code === '28P01' || code === '28000') {
      const user = typeof message === 'string' ? /for user "([^"]+)"/.exec(message)?.[1] : undefined;
      return `authentication failed for user ${user ?? '(unknown)'}`;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

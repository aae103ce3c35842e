import { ApiError } from './errors';
import type { Page } from './wire';

/**
 * AgentMail's docs do not state a default page size; 10 is our choice, small enough that a
 * caller which forgets `next_page_token` notices in tests. The SDK documents a cap of 100 for
 * a thread's messages and for filtered listings: above it is a 400 here.
 */
export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 100;

/** Items carry their insertion sequence so a page token survives items arriving meanwhile. */
export interface Sequenced<T> {
  seq: number;
  value: T;
}

/**
 * Where a page ended: the last item's place in the order. `at` is its timestamp (ms) for listings
 * ordered by time (messages, as AgentMail orders them); absent for listings in insertion order.
 */
interface Cursor {
  seq: number;
  asc: boolean;
  at?: number;
}

export function parseLimit(raw: unknown): number {
  if (raw === undefined || raw === '') return DEFAULT_LIMIT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT)
    throw ApiError.validation(`limit must be an integer from 1 to ${MAX_LIMIT}`);
  return n;
}

/**
 * One page of a listing, as its query asks: `items` in insertion order (oldest first), newest
 * first unless `ascending`, `limit` and `page_token` read from the query string.
 */
export function pageOf<T>(
  items: Sequenced<T>[],
  query: { limit?: unknown; page_token?: string | string[] | undefined },
  ascending: boolean,
): Page<T> {
  const token = Array.isArray(query.page_token) ? query.page_token[0] : query.page_token;
  return paginate(ascending ? items : [...items].reverse(), parseLimit(query.limit), token, ascending);
}

/**
 * One page of a listing ordered by each item's `timestamp`, as AgentMail lists an inbox's messages
 * ("ordered by `timestamp` descending", `ascending` for the other way): mail imported or delivered
 * late sits where its time puts it, not where it was stored. Ties go by insertion order.
 */
export function pageByTime<T extends { timestamp: string }>(
  items: Sequenced<T>[],
  query: { limit?: unknown; page_token?: string | string[] | undefined },
  ascending: boolean,
): Page<T> {
  const at = (item: Sequenced<T>) => Date.parse(item.value.timestamp);
  const compare = (a: { at: number; seq: number }, b: { at: number; seq: number }) => a.at - b.at || a.seq - b.seq;
  const sorted = [...items].sort((a, b) => compare({ at: at(a), seq: a.seq }, { at: at(b), seq: b.seq }));
  const ordered = ascending ? sorted : sorted.reverse();
  const limit = parseLimit(query.limit);
  const token = Array.isArray(query.page_token) ? query.page_token[0] : query.page_token;
  let rest = ordered;
  if (token) {
    const cursor = decodeToken(token);
    if (cursor.asc !== ascending || cursor.at === undefined) throw ApiError.validation('page_token is not valid here');
    const last = { at: cursor.at, seq: cursor.seq };
    rest = ordered.filter((item) => {
      const order = compare({ at: at(item), seq: item.seq }, last);
      return ascending ? order > 0 : order < 0;
    });
  }
  const page = rest.slice(0, limit);
  const last = page[page.length - 1];
  const more = rest.length > limit && last !== undefined;
  return {
    count: page.length,
    limit,
    ...(more ? { next_page_token: encodeToken({ seq: last.seq, asc: ascending, at: at(last) }) } : {}),
    items: page.map((item) => item.value),
  };
}

/** `ordered` is already sorted in the requested direction. */
export function paginate<T>(
  ordered: Sequenced<T>[],
  limit: number,
  pageToken: string | undefined,
  asc: boolean,
): Page<T> {
  let rest = ordered;
  if (pageToken) {
    const cursor = decodeToken(pageToken);
    if (cursor.asc !== asc) throw ApiError.validation('page_token was issued for the other sort order');
    rest = ordered.filter((item) => (asc ? item.seq > cursor.seq : item.seq < cursor.seq));
  }
  const page = rest.slice(0, limit);
  const last = page[page.length - 1];
  const more = rest.length > limit && last !== undefined;
  return {
    count: page.length,
    limit,
    ...(more ? { next_page_token: encodeToken({ seq: last.seq, asc }) } : {}),
    items: page.map((item) => item.value),
  };
}

function encodeToken(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeToken(token: string): Cursor {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<Cursor>;
    if (typeof parsed.seq === 'number' && typeof parsed.asc === 'boolean')
      return { seq: parsed.seq, asc: parsed.asc, ...(typeof parsed.at === 'number' ? { at: parsed.at } : {}) };
  } catch {
    // fall through: a token we did not issue
  }
  throw ApiError.validation('page_token is not valid');
}

/** AgentMail's list envelope: `{ count, limit, next_page_token?, <name>: [...] }`. */
export function listResponse<T, K extends string>(
  name: K,
  page: Page<T>,
): { count: number; limit: number; next_page_token?: string } & Record<K, T[]> {
  const envelope = {
    count: page.count,
    limit: page.limit,
    ...(page.next_page_token ? { next_page_token: page.next_page_token } : {}),
  };
  return { ...envelope, [name]: page.items } as { count: number; limit: number; next_page_token?: string } & Record<
    K,
    T[]
  >;
}

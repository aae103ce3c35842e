import { createHash } from 'node:crypto';
import type { VirtualClock } from './clock';
import { ApiError } from './errors';

/** AgentMail forgets a key 24 h after the send completes (knowledge-base: preventing duplicate sends). */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000;
/** AgentMail does not publish a limit; 256 is the common ceiling (Resend, Nylas, Emailit). */
export const MAX_KEY_LENGTH = 256;

export const KeyStatus = { InProgress: 'in_progress', Completed: 'completed' } as const;
export type KeyStatus = (typeof KeyStatus)[keyof typeof KeyStatus];

export interface StoredResponse {
  status: number;
  body: unknown;
}

export interface KeyRecord {
  key: string;
  endpoint: string;
  fingerprint: string;
  status: KeyStatus;
  created_at: string;
  completed_at: string | null;
  expires_at: string | null;
  response: StoredResponse | null;
}

export type Claim = { kind: 'new' } | { kind: 'replay'; response: StoredResponse };

/** The conflict messages are stable: callers tell "retry later" from "your bug" by them and by `code`. */
export const IN_PROGRESS_MESSAGE =
  'A request with this Idempotency-Key is still in progress; retry later with the same key';
export const REUSED_MESSAGE = 'Idempotency-Key reused with a different request';

/** undefined → no key (every request sends); anything present must be a usable key. */
export function parseIdempotencyKey(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  const key = Array.isArray(header) ? header.join(', ') : header;
  const problem =
    key.length === 0
      ? 'must not be empty'
      : key.length > MAX_KEY_LENGTH
        ? `must be at most ${MAX_KEY_LENGTH} characters`
        : !/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(key)
          ? 'must be printable ASCII'
          : null;
  if (problem)
    throw ApiError.validation(`Idempotency-Key ${problem}`, [{ field: 'Idempotency-Key', message: problem }]);
  return key;
}

/** sha256 over method, path and the body with object keys sorted. */
export function requestFingerprint(endpoint: string, body: unknown): string {
  return createHash('sha256')
    .update(`${endpoint}\n${canonicalJson(body ?? null)}`)
    .digest('hex');
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * Key → first request and its response. claim() is synchronous, so check-and-insert is atomic
 * on Node's single thread: two concurrent requests can never both see "new".
 */
export class IdempotencyStore {
  private readonly records = new Map<string, KeyRecord>();

  constructor(private readonly clock: VirtualClock) {}

  claim(key: string, endpoint: string, fingerprint: string): Claim {
    const existing = this.records.get(key);
    if (existing && this.expired(existing)) this.records.delete(key);
    const record = this.records.get(key);
    if (!record) {
      const created_at = this.clock.iso();
      this.records.set(key, {
        key,
        endpoint,
        fingerprint,
        status: KeyStatus.InProgress,
        created_at,
        completed_at: null,
        expires_at: null,
        response: null,
      });
      return { kind: 'new' };
    }
    if (record.endpoint !== endpoint || record.fingerprint !== fingerprint)
      throw ApiError.conflict(REUSED_MESSAGE, 'idempotency_key_reused');
    if (record.status === KeyStatus.InProgress || !record.response)
      throw ApiError.conflict(IN_PROGRESS_MESSAGE, 'idempotency_key_in_progress');
    return { kind: 'replay', response: record.response };
  }

  complete(key: string, response: StoredResponse): void {
    const record = this.records.get(key);
    if (!record) return;
    const now = this.clock.nowMs();
    record.status = KeyStatus.Completed;
    record.response = response;
    record.completed_at = new Date(now).toISOString();
    record.expires_at = new Date(now + KEY_TTL_MS).toISOString();
  }

  /** A request that failed before sending frees its key, so the corrected request may use it. */
  release(key: string): void {
    if (this.records.get(key)?.status === KeyStatus.InProgress) this.records.delete(key);
  }

  list(): KeyRecord[] {
    return [...this.records.values()].filter((r) => !this.expired(r));
  }

  get size(): number {
    return this.list().length;
  }

  reset(): void {
    this.records.clear();
  }

  private expired(record: KeyRecord): boolean {
    return record.expires_at !== null && Date.parse(record.expires_at) <= this.clock.nowMs();
  }
}

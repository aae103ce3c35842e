import { ApiError } from '../errors';

/** The query string the SDK sends for messages.list / threads.list (arrays arrive JSON-encoded). */
export interface ListQuery {
  limit?: string;
  page_token?: string | string[];
  labels?: string | string[];
  before?: string;
  after?: string;
  ascending?: string;
  include_spam?: string;
  include_blocked?: string;
  include_unauthenticated?: string;
  include_trash?: string;
  from?: string | string[];
  to?: string | string[];
  subject?: string | string[];
  /** threads.list's names for from/to. */
  senders?: string | string[];
  recipients?: string | string[];
}

interface Filterable {
  labels: string[];
  timestamp: string;
  from?: string;
  to?: string[];
  cc?: string[];
  subject?: string;
}

/** Labels that hide a message unless the matching include_* flag is set. */
const HIDDEN = ['spam', 'blocked', 'unauthenticated', 'trash'] as const;

export function listFilter(query: ListQuery): { filter: (item: Filterable) => boolean; ascending: boolean } {
  const labels = stringList(query.labels);
  const before = instant(query.before, 'before');
  const after = instant(query.after, 'after');
  const hidden = HIDDEN.filter((label) => !flag(query[`include_${label}`]));
  const from = stringList(query.from).map((s) => s.toLowerCase());
  const to = stringList(query.to).map((s) => s.toLowerCase());
  const subject = stringList(query.subject).map((s) => s.toLowerCase());
  const filter = (item: Filterable): boolean => {
    const at = Date.parse(item.timestamp);
    const recipients = [...(item.to ?? []), ...(item.cc ?? [])].join(' ').toLowerCase();
    return (
      labels.every((l) => item.labels.includes(l)) &&
      !hidden.some((l) => item.labels.includes(l) && !labels.includes(l)) &&
      (before === undefined || at < before) &&
      (after === undefined || at > after) &&
      from.every((f) => (item.from ?? '').toLowerCase().includes(f)) &&
      to.every((t) => recipients.includes(t)) &&
      subject.every((s) => (item.subject ?? '').toLowerCase().includes(s))
    );
  };
  return { filter, ascending: flag(query.ascending) };
}

/** The SDK sends `labels=["a","b"]`; raw callers may repeat `labels=a&labels=b`. Both work. */
export function stringList(value: string | string[] | undefined): string[] {
  const values = value === undefined ? [] : Array.isArray(value) ? value : [value];
  return values.flatMap((v) => {
    if (!v.startsWith('[')) return [v];
    try {
      const parsed: unknown = JSON.parse(v);
      if (Array.isArray(parsed) && parsed.every((x) => typeof x === 'string')) return parsed;
    } catch {
      // not JSON: treat as a plain value
    }
    return [v];
  });
}

function flag(value: string | undefined): boolean {
  return value === 'true' || value === '1';
}

function instant(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw ApiError.validation(`${name} must be an ISO 8601 date-time`);
  return ms;
}

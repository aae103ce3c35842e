/**
 * How long a provider asked us to wait (429, 503), from its response headers: `retry-after-ms`
 * (OpenAI), `retry-after` in seconds or as an HTTP date (RFC 9110). Undefined when absent or
 * unreadable: Temporal's retry policy then picks the delay. Capped, so a confused header cannot
 * park a message for a day.
 */
export const MAX_RETRY_AFTER_MS = 10 * 60 * 1000;

export function retryAfterMs(
  headers: Record<string, string | undefined> | Headers | undefined,
  now = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const get = (name: string) =>
    headers instanceof Headers ? (headers.get(name) ?? undefined) : (headers[name] ?? headers[name.toLowerCase()]);
  const milliseconds = Number.parseFloat(get('retry-after-ms') ?? '');
  if (Number.isFinite(milliseconds) && milliseconds >= 0) return Math.min(Math.ceil(milliseconds), MAX_RETRY_AFTER_MS);
  const value = get('retry-after')?.trim();
  if (!value) return undefined;
  const seconds = /^\d+(\.\d+)?$/.test(value) ? Number.parseFloat(value) * 1000 : Date.parse(value) - now;
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(Math.max(0, Math.ceil(seconds)), MAX_RETRY_AFTER_MS);
}

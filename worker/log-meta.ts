/**
 * The SDK's log lines as pino writes them. Its "Workflow failed" line carries the run's failure
 * as an Error object under `error`, which JSON makes `{}`: a person reading the log saw that a
 * message failed but not why. The failure's type (the innermost ApplicationFailure's, as the Web
 * UI shows it) and message are written instead; our failures' messages hold ids and fixed
 * descriptions, never customer text (activities/failures/boundary.ts).
 */
export function loggableMeta(meta: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!meta || !(meta.error instanceof Error)) return meta ?? {};
  return { ...meta, error: describeFailure(meta.error) };
}

function describeFailure(error: Error): { type: string; message: string } {
  let innermost: Error = error;
  let type: string | undefined;
  const seen = new Set<unknown>();
  for (let current: unknown = error; current instanceof Error && !seen.has(current);) {
    seen.add(current);
    innermost = current;
    const own = (current as { type?: unknown }).type;
    if (typeof own === 'string' && own !== '') type = own;
    current = current.cause;
  }
  return { type: type ?? innermost.name, message: innermost.message || error.message };
}

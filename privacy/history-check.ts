import type { Client } from '@temporalio/client';

/**
 * Temporal's history holds no content by design (ids, keys, statuses: docs/architecture.md): this
 * checks it, for the erasure's receipt. Every payload of every event of each workflow (inputs,
 * results, failures, signals, updates, search attributes, memos) is decoded and searched for the
 * erased texts, which the erasure holds in memory only, never stored. One exception is documented:
 * a reviewer's edited text travels in the `review` Update's payload (contract/workflow.ts), so an
 * edited reply's text can be found here; the receipt then names the workflow.
 */

export interface HistoryCheck {
  workflowId: string;
  /** Temporal has the workflow (false: never started, or past the namespace's retention). */
  found: boolean;
  /** Whether any decoded payload holds one of the erased texts (false is what the design promises). */
  holdsErasedText: boolean;
  /** RUNNING, COMPLETED, FAILED, TERMINATED, …: the last run's status. */
  status: string | null;
}

/** The pieces of text looked for: lines long enough to be theirs, not a common word. */
export function needlesOf(texts: Array<string | null | undefined>): string[] {
  const needles = new Set<string>();
  for (const text of texts) {
    if (!text) continue;
    for (const line of text.split(/\r?\n/)) {
      const trimmed = line.trim();
      if (trimmed.length >= 12) needles.add(trimmed.slice(0, 80).toLowerCase());
    }
  }
  return [...needles];
}

/** Every byte string in a decoded history proto, as UTF-8 text (payload data, search attribute values). */
function payloadTexts(value: unknown, out: string[], depth = 0): void {
  if (depth > 64 || value === null || value === undefined) return;
  if (value instanceof Uint8Array) {
    out.push(Buffer.from(value).toString('utf8'));
    return;
  }
  if (typeof value === 'string') {
    out.push(value);
    return;
  }
  if (Array.isArray(value)) {
    for (const item of value) payloadTexts(item, out, depth + 1);
    return;
  }
  if (typeof value === 'object') for (const item of Object.values(value)) payloadTexts(item, out, depth + 1);
}

/** A JSON payload escapes quotes and newlines: a needle is looked for as written and as JSON writes it. */
const forms = (needle: string): string[] => [needle, JSON.stringify(needle).slice(1, -1)];

export async function checkHistories(
  client: Client,
  workflowIds: string[],
  needles: string[],
): Promise<HistoryCheck[]> {
  const checks: HistoryCheck[] = [];
  for (const workflowId of workflowIds) {
    const handle = client.workflow.getHandle(workflowId);
    const description = await handle.describe().catch(() => undefined);
    if (!description) {
      checks.push({ workflowId, found: false, holdsErasedText: false, status: null });
      continue;
    }
    const history = await handle.fetchHistory();
    const texts: string[] = [];
    payloadTexts(history, texts);
    const haystack = texts.join('\n').toLowerCase();
    const holds = needles.some((needle) => forms(needle).some((form) => haystack.includes(form)));
    checks.push({ workflowId, found: true, holdsErasedText: holds, status: description.status.name });
  }
  return checks;
}

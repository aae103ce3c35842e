import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';

/**
 * A workflow's history as text a test can search: every payload decoded (inputs, results,
 * signals, updates, markers, failure details, search attributes, memos), next to every plain
 * string (failure messages, stack traces). A JSON dump of the history finds nothing: payload
 * data is bytes (base64 in JSON), so "not in the dump" proves nothing.
 */
export async function historyText(client: Client, handle: WorkflowHandle): Promise<HistoryText> {
  const history = await handle.fetchHistory();
  const converter = client.options.loadedDataConverter.payloadConverter;
  const texts: string[] = [];
  let payloads = 0;
  const seen = new Set<unknown>();
  const visit = (value: unknown): void => {
    if (value === null || value === undefined) return;
    if (typeof value === 'string') return void texts.push(value);
    if (value instanceof Uint8Array) return void texts.push(Buffer.from(value).toString('utf8'));
    if (typeof value !== 'object' || seen.has(value)) return;
    seen.add(value);
    if (isPayload(value)) {
      payloads += 1;
      let decoded: unknown;
      try {
        decoded = converter.fromPayload(value);
      } catch {
        decoded = undefined;
      }
      // Both the converter's value (JSON, unescaped strings) and the raw bytes, whatever the encoding.
      texts.push(typeof decoded === 'string' ? decoded : (JSON.stringify(decoded) ?? ''));
      collectStrings(decoded, texts);
      texts.push(Buffer.from(value.data ?? new Uint8Array()).toString('utf8'));
      return;
    }
    for (const child of Array.isArray(value) ? value : Object.values(value)) visit(child);
  };
  visit(history);
  return { text: texts.join('\n'), payloads };
}

export interface HistoryText {
  /** Every string of the history, payloads decoded. */
  text: string;
  /** How many payloads were decoded: a search over none would prove nothing. */
  payloads: number;
}

function isPayload(value: object): value is Payload {
  return 'data' in value && 'metadata' in value && (value as Payload).data instanceof Uint8Array;
}

function collectStrings(value: unknown, into: string[]): void {
  if (typeof value === 'string') into.push(value);
  else if (value && typeof value === 'object') for (const child of Object.values(value)) collectStrings(child, into);
}

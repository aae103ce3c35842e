import { setTimeout as sleep } from 'node:timers/promises';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';

/**
 * Fault injection for the AgentMail API (/v0 only), to make ugly timing windows reproducible:
 *  - delay: the request takes `ms` longer. On sends the pause sits between claiming the
 *    Idempotency-Key and sending, so a second request with the key sees "in progress".
 *  - status: answer `status` without doing anything; `message` sets the error body's message
 *    (as AgentMail's own 4xx bodies can quote what was sent: a test checks it never leaks).
 *  - drop-before-commit: reset the connection before anything happens.
 *  - drop-after-commit: do the work (email sent, key recorded), then reset the connection
 *    instead of answering: the client cannot know the outcome.
 *  - stale-listing: a thread read leaves out the messages we sent in the last `ms` (AgentMail's
 *    reads are eventually consistent: a sent email shows in its thread a little later).
 * Each request takes the first matching rule that has uses left.
 */
export const faultRuleSchema = z.object({
  match: z
    .object({
      method: z.string().optional(),
      /** Substring of the decoded path (no query string). */
      path: z.string().optional(),
      /** Regular expression tested against the decoded path. */
      path_regex: z.string().optional(),
      /** How many requests the rule affects; unlimited when absent. */
      count: z.number().int().positive().optional(),
    })
    .default({}),
  action: z.enum(['delay', 'status', 'drop-after-commit', 'drop-before-commit', 'stale-listing']),
  ms: z.number().int().min(0).max(600_000).optional(),
  status: z.number().int().min(100).max(599).optional(),
  message: z.string().max(10_000).optional(),
});
export type FaultRuleInput = z.input<typeof faultRuleSchema>;

export interface FaultRule extends z.output<typeof faultRuleSchema> {
  id: number;
  hits: number;
}

export class Faults {
  private rules: FaultRule[] = [];
  private nextId = 1;
  /** The rule a request drew at arrival, looked up again by later hooks and handlers. */
  private readonly taken = new WeakMap<IncomingMessage, FaultRule>();
  private readonly delayed = new WeakSet<IncomingMessage>();

  set(inputs: z.output<typeof faultRuleSchema>[]): FaultRule[] {
    for (const input of inputs) {
      if (input.match.path_regex !== undefined) new RegExp(input.match.path_regex); // throws early on a bad pattern
    }
    this.rules = inputs.map((input) => ({ ...input, id: this.nextId++, hits: 0 }));
    return this.rules;
  }

  list(): FaultRule[] {
    return this.rules;
  }

  clear(): void {
    this.rules = [];
  }

  /** Called once per API request; consumes one use of the matching rule. */
  draw(raw: IncomingMessage, method: string, path: string): FaultRule | undefined {
    const rule = this.rules.find((r) => matches(r, method, path));
    if (!rule) return undefined;
    rule.hits += 1;
    this.taken.set(raw, rule);
    return rule;
  }

  drawn(raw: IncomingMessage): FaultRule | undefined {
    return this.taken.get(raw);
  }

  /**
   * The delay fault, at most once per request: sends call it inside the claim window, and
   * the app's onSend hook calls it for every other route (a no-op when already applied).
   */
  async delay(raw: IncomingMessage): Promise<void> {
    const rule = this.taken.get(raw);
    if (rule?.action !== 'delay' || this.delayed.has(raw)) return;
    this.delayed.add(raw);
    await sleep(rule.ms ?? 1000);
  }
}

/** Whether a stale read leaves this message out: one of ours (`sent`), created less than `ms` ago. */
export function staleHides(
  rule: FaultRule | undefined,
  message: { labels?: string[] | null; created_at: string },
  nowMs: number,
): boolean {
  if (rule?.action !== 'stale-listing' || !(message.labels ?? []).includes('sent')) return false;
  return nowMs - Date.parse(message.created_at) < (rule.ms ?? 1000);
}

function matches(rule: FaultRule, method: string, path: string): boolean {
  const { match } = rule;
  if (match.count !== undefined && rule.hits >= match.count) return false;
  if (match.method !== undefined && match.method.toUpperCase() !== method) return false;
  if (match.path !== undefined && !path.includes(match.path)) return false;
  if (match.path_regex !== undefined && !new RegExp(match.path_regex).test(path)) return false;
  return true;
}

/** The path without its query, percent-decoded (message ids arrive encoded). */
export function decodedPath(url: string): string {
  const path = url.split('?', 1)[0] ?? url;
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

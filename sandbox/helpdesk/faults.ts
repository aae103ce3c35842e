import { z } from 'zod';

/**
 * Faults for the help-desk stand-in's API (/api/v2 only). Each request takes the first matching
 * rule with uses left:
 *  - delay: answer `ms` later
 *  - status: answer `status` without doing anything
 *  - rate-limit: answer 429 with `Retry-After: <retry_after_seconds>`
 *  - drop-before-commit: reset the connection before anything happens
 *  - drop-after-commit: do the work (the ticket is created, the key recorded), then reset the
 *    connection instead of answering: the client cannot know the outcome
 */
export const helpdeskFaultSchema = z.object({
  match: z.object({ method: z.string().optional(), path: z.string().optional() }).default({}),
  count: z.number().int().positive().optional(),
  action: z.enum(['delay', 'status', 'rate-limit', 'drop-before-commit', 'drop-after-commit']),
  ms: z.number().int().min(0).max(600_000).optional(),
  status: z.number().int().min(400).max(599).optional(),
  retry_after_seconds: z.number().min(0).optional(),
});
export type HelpdeskFaultInput = z.input<typeof helpdeskFaultSchema>;
export type HelpdeskFault = z.output<typeof helpdeskFaultSchema> & { id: number; hits: number };

export class HelpdeskFaults {
  private rules: HelpdeskFault[] = [];
  private nextId = 1;

  set(inputs: Array<z.output<typeof helpdeskFaultSchema>>): HelpdeskFault[] {
    this.rules = inputs.map((input) => ({ ...input, id: this.nextId++, hits: 0 }));
    return this.rules;
  }

  clear(): void {
    this.rules = [];
  }

  draw(method: string, path: string): HelpdeskFault | undefined {
    const rule = this.rules.find(
      (r) =>
        (r.count === undefined || r.hits < r.count) &&
        (r.match.method === undefined || r.match.method.toUpperCase() === method) &&
        (r.match.path === undefined || path.includes(r.match.path)),
    );
    if (rule) rule.hits += 1;
    return rule;
  }
}

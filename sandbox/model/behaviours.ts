import { z } from 'zod';

/**
 * How the model stand-in answers, scripted by tests and developers: each request takes the first
 * rule that matches it and has uses left; with none, it answers with a plain default reply.
 *  - reply:      answer `text` (empty, HTML, too long, an injected "To:" line…), finish "stop"
 *  - delay:      wait `ms`, then answer as it otherwise would (a slow model; the client may give up)
 *  - status:     answer `status` (500, 503, 401, 400…) with the provider's error body
 *  - rate-limit: answer 429 with `retry-after: <retry_after_seconds>`
 *  - refuse:     a refusal (OpenAI: `message.refusal`; Anthropic: `stop_reason: "refusal"`)
 *  - truncate:   a reply cut off at the output limit (finish "length" / "max_tokens")
 *  - drop:       reset the connection without answering
 *  - handoff:    (structured output) a hand-off, `text` its reason
 *  - bad-citation: (structured output) a reply citing `text` (default: an id never given)
 *  - raw:        answer `text` verbatim, even when structured output was asked for (a model ignoring the schema)
 */
export const behaviourSchema = z.object({
  match: z.object({ contains: z.string().min(1).optional() }).default({}),
  /** How many requests the rule affects; unlimited when absent. */
  count: z.number().int().positive().optional(),
  action: z.enum([
    'reply',
    'delay',
    'status',
    'rate-limit',
    'refuse',
    'truncate',
    'drop',
    'handoff',
    'bad-citation',
    'raw',
  ]),
  text: z.string().optional(),
  ms: z.number().int().min(0).max(600_000).optional(),
  status: z.number().int().min(400).max(599).optional(),
  retry_after_seconds: z.number().min(0).optional(),
});
export type BehaviourInput = z.input<typeof behaviourSchema>;
export type Behaviour = z.output<typeof behaviourSchema> & { id: number; hits: number };

export class Behaviours {
  private rules: Behaviour[] = [];
  private nextId = 1;

  set(inputs: Array<z.output<typeof behaviourSchema>>): Behaviour[] {
    this.rules = inputs.map((input) => ({ ...input, id: this.nextId++, hits: 0 }));
    return this.rules;
  }

  list(): Behaviour[] {
    return this.rules;
  }

  clear(): void {
    this.rules = [];
  }

  /** The rule this request takes (one use of it), given the request's prompt text. */
  draw(prompt: string): Behaviour | undefined {
    const rule = this.rules.find(
      (r) =>
        (r.count === undefined || r.hits < r.count) &&
        (r.match.contains === undefined || prompt.includes(r.match.contains)),
    );
    if (rule) rule.hits += 1;
    return rule;
  }
}

import { readFileSync } from 'node:fs';
import { z } from 'zod';

/**
 * The worker's settings for its two outside providers: the model that drafts replies and the
 * help desk that holds tickets. Both default to offline implementations (a deterministic drafter,
 * tickets in our own Postgres) so the system runs anywhere; choosing a real one makes its
 * credentials required, checked at start-up with the variable named.
 */

export const DRAFT_PROVIDERS = ['offline', 'openai', 'anthropic', 'openai-compatible'] as const;
export type DraftProvider = (typeof DRAFT_PROVIDERS)[number];
export const TICKET_PROVIDERS = ['postgres', 'zendesk'] as const;

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

/** Inbox address → instructions: inline JSON, or the path of a JSON file holding the same object. */
const inboxInstructions = z
  .string()
  .default('{}')
  .transform((value, ctx) => {
    const inline = value.trim().startsWith('{');
    let text = value;
    if (!inline) {
      try {
        text = readFileSync(value, 'utf8');
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: `names a file that cannot be read (${(error as Error).message}); give a JSON object or the path of a JSON file`,
        });
        return z.NEVER;
      }
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      ctx.addIssue({
        code: 'custom',
        message: `${inline ? 'is' : `names a file (${value}) that is`} not valid JSON; expected {"support@example.com": "instructions…"}`,
      });
      return z.NEVER;
    }
    const map = z.record(z.string().trim().min(3), z.string().trim().min(1)).safeParse(parsed);
    if (!map.success) {
      ctx.addIssue({
        code: 'custom',
        message:
          'must be a JSON object mapping inbox addresses to non-empty instructions, e.g. {"support@example.com": "…"}',
      });
      return z.NEVER;
    }
    return Object.fromEntries(Object.entries(map.data).map(([inbox, text]) => [inbox.toLowerCase(), text]));
  });

export const draftingVars = {
  /** offline (deterministic, no network), openai, anthropic, or openai-compatible (Ollama, vLLM, llama.cpp, LM Studio, …). */
  DRAFT_PROVIDER: z.enum(DRAFT_PROVIDERS, { error: `must be one of ${DRAFT_PROVIDERS.join(', ')}` }).default('offline'),
  DRAFT_MODEL: z.string().trim().min(1).optional(),
  /** The provider's API root, e.g. http://127.0.0.1:11434/v1 for Ollama; unset: the provider's own API. */
  DRAFT_BASE_URL: httpUrl.optional(),
  DRAFT_API_KEY: z.string().trim().min(1).optional(),
  /**
   * One model call's deadline. Below the draft activity's 2-minute start-to-close timeout, so a
   * slow call ends as a retryable DraftTimeout before Temporal gives up on the attempt.
   */
  DRAFT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(110_000, 'must be at most 110000 (the draft activity times out at 2 minutes)')
    .default(60_000),
  /** A reply cut off at this limit is not sent (InvalidDraft); 2,000 tokens is well above MAX_DRAFT_CHARACTERS. */
  DRAFT_MAX_OUTPUT_TOKENS: z.coerce.number().int().min(64).max(32_000).default(2_000),
  /** The instructions for every inbox without its own; unset: a careful general support agent. */
  DRAFT_INSTRUCTIONS: z.string().trim().min(1).optional(),
  DRAFT_INBOX_INSTRUCTIONS: inboxInstructions,
};

export const ticketVars = {
  TICKET_PROVIDER: z
    .enum(TICKET_PROVIDERS, { error: `must be one of ${TICKET_PROVIDERS.join(', ')}` })
    .default('postgres'),
  /** https://<subdomain>.zendesk.com */
  ZENDESK_URL: httpUrl.optional(),
  /** The agent the API token belongs to (API token auth: `<email>/token:<token>`). */
  ZENDESK_EMAIL: z.string().trim().min(3).optional(),
  ZENDESK_API_TOKEN: z.string().trim().min(1).optional(),
  /** One Zendesk request's deadline; a timed-out create is retried with the same Idempotency-Key. */
  ZENDESK_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(100_000).default(15_000),
  // The Zendesk comment marker (issue 39, point 11): an HMAC of the comment's operation key under
  // this secret, so no customer can write a comment's marker into their own text.
  /** A secret of this deployment, 32 characters or more (e.g. `openssl rand -hex 32`); required with Zendesk. */
  ZENDESK_MARKER_SECRET: z
    .string()
    .trim()
    .min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)')
    .optional(),
};

type ProviderEnv = Partial<Record<keyof typeof draftingVars | keyof typeof ticketVars, unknown>>;

const needs: Record<Exclude<DraftProvider, 'offline'>, Array<[keyof typeof draftingVars, string]>> = {
  openai: [
    ['DRAFT_MODEL', 'e.g. gpt-4o-mini'],
    ['DRAFT_API_KEY', 'your OpenAI API key'],
  ],
  anthropic: [
    ['DRAFT_MODEL', 'e.g. claude-sonnet-4-5'],
    ['DRAFT_API_KEY', 'your Anthropic API key'],
  ],
  'openai-compatible': [
    ['DRAFT_MODEL', 'the model name the server knows, e.g. llama3.1'],
    ['DRAFT_BASE_URL', "the server's API root, e.g. http://127.0.0.1:11434/v1"],
  ],
};

/**
 * Cross-variable checks, run even when other variables are wrong too (`when: () => true` at the
 * call site) so one start-up error lists everything to fix.
 */
export function checkProviderSettings(env: ProviderEnv, ctx: z.RefinementCtx): void {
  const provider = env.DRAFT_PROVIDER;
  if (provider === 'openai' || provider === 'anthropic' || provider === 'openai-compatible') {
    for (const [name, hint] of needs[provider]) {
      if (env[name] === undefined)
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `is required when DRAFT_PROVIDER=${provider} (${hint})`,
        });
    }
  }
  if (env.TICKET_PROVIDER === 'zendesk') {
    const zendesk: Array<[keyof typeof ticketVars, string]> = [
      ['ZENDESK_URL', 'https://<subdomain>.zendesk.com'],
      ['ZENDESK_EMAIL', 'the agent the API token belongs to'],
      ['ZENDESK_API_TOKEN', 'Admin Center → Apps and integrations → Zendesk API'],
      [
        'ZENDESK_MARKER_SECRET',
        'a secret of this deployment that marks our comments, e.g. openssl rand -hex 32; keep it across restarts',
      ],
    ];
    for (const [name, hint] of zendesk) {
      if (env[name] === undefined)
        ctx.addIssue({ code: 'custom', path: [name], message: `is required when TICKET_PROVIDER=zendesk (${hint})` });
    }
  }
}

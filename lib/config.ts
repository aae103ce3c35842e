import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { isSupportedCountry } from 'libphonenumber-js/max';
import { draftProblem } from '../contract/draft-text';
import { BUSINESS_HOURS_EXAMPLE, type BusinessHours, parseBusinessHours } from './business-hours';
import { type HandoffTopic, readHandoffTopics } from './handoff-topics';
import { type ExampleFile, readExampleFiles } from './learned-handoffs/examples';
import { checkExamples } from './learned-handoffs';
import { checkProviderSettings, draftingVars, ticketVars } from './provider-config';
import { loadTemporalConnection, type TemporalConnectionSettings } from './temporal-connection';

/**
 * Configuration comes from the environment and is validated once at start-up, so a
 * missing or malformed variable stops the process with a message naming it instead of
 * failing on the first webhook. Each process reads only the variables it needs.
 */

const nonEmpty = (hint: string) =>
  z
    .string({ error: `is required (${hint})` })
    .trim()
    .min(1, `is required (${hint})`);

const postgresUrl = nonEmpty('e.g. postgres://user:password@127.0.0.1:5432/replyonce').refine(
  (value) => /^postgres(ql)?:\/\//.test(value) && URL.canParse(value),
  'must be a postgres:// URL, e.g. postgres://user:password@127.0.0.1:5432/replyonce',
);

/**
 * The Svix signing secret: `whsec_` and the base64 of the key (Svix issues 24 bytes; the Standard
 * Webhooks spec allows 24 to 64). Checked here, so a mistyped secret stops the API at start-up
 * with the variable named, instead of a stack trace from the verifier or a 400 for every webhook.
 */
export const webhookSecret = nonEmpty('the webhook signing secret, whsec_…').superRefine((value, ctx) => {
  const problem = webhookSecretProblem(value);
  if (problem)
    ctx.addIssue({
      code: 'custom',
      message: `${problem}: copy the signing secret AgentMail shows for the webhook (whsec_ and 32 or more base64 characters)`,
    });
});

export function webhookSecretProblem(value: string): string | null {
  if (!value.startsWith('whsec_')) return 'must start with whsec_';
  const key = value.slice('whsec_'.length);
  if (key === '') return 'has nothing after whsec_';
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || key.length % 4 !== 0) return 'is not base64 after whsec_';
  const bytes = Buffer.from(key, 'base64').length;
  if (bytes < 24 || bytes > 64) return `holds a ${bytes}-byte key; Svix secrets hold 24 to 64 bytes`;
  return null;
}

/**
 * The connection itself (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*,
 * TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE) is Temporal's environment configuration, loaded and checked
 * by lib/temporal-connection.ts; only the task queue is ours.
 */
const temporalVars = {
  TEMPORAL_TASK_QUEUE: z.string().trim().min(1).default('replyonce'),
};

const commonVars = {
  ...temporalVars,
  DATABASE_URL: postgresUrl,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `json` (one object a line, for machines) or `pretty` (for a terminal; needs the dev dependency pino-pretty). */
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
};

/**
 * Operations (and so catch-up replays, which lean on them) are kept this long. Longer than the
 * namespace's 7-day retention plus a day: past Temporal's history, the operation rows are what
 * keeps a replayed message from being answered twice.
 */
const OPERATION_RETENTION_DAYS = z.coerce.number().int().min(8).default(90);

/** Reading mail from AgentMail (the worker always, the API only for its admin routes, the replay CLI). */
const agentmailVars = {
  AGENTMAIL_API_KEY: nonEmpty('the AgentMail API key replyonce reads and sends mail with'),
  /** Unset means AgentMail's production API; the local sandbox sets it to its own address. */
  AGENTMAIL_BASE_URL: z.url({ error: 'must be an http(s) URL' }).optional(),
};

const apiSchema = z
  .object({
    ...commonVars,
    /** Erasure (POST /admin/forget, privacy/): which help desk holds the tickets it erases or lists. */
    TICKET_PROVIDER: ticketVars.TICKET_PROVIDER,
    /**
     * A trusted authenticating proxy in front of the API (OIDC, e.g. oauth2-proxy) names the person
     * in this request header (e.g. x-forwarded-email); the review routes then take a verdict from
     * it, recorded as `proxy:<value>`. Unset (the default): only reviewer tokens. Set it only when
     * every request reaches the API through that proxy and the proxy overwrites the header.
     */
    REVIEW_PROXY_USER_HEADER: z
      .string()
      .trim()
      .toLowerCase()
      .regex(/^[a-z0-9-]+$/, 'must be an HTTP header name, e.g. x-forwarded-email')
      .optional(),
    // The proxy's shared secret (issue 39, point 8): the API's port is public (AgentMail must reach
    // the webhook), so a name in REVIEW_PROXY_USER_HEADER counts only on a request that also carries
    // this secret in `x-replyonce-proxy-secret`, which only the proxy adds (api/admin/review.ts).
    /** A secret the proxy adds to every request it forwards; required with REVIEW_PROXY_USER_HEADER. */
    REVIEW_PROXY_SECRET: z
      .string()
      .trim()
      .min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)')
      .optional(),
    /** Bearer token for /admin/*; unset, the admin routes do not exist (404). */
    ADMIN_TOKEN: z.string().trim().min(16, 'must be at least 16 characters (e.g. openssl rand -hex 32)').optional(),
    AGENTMAIL_API_KEY: agentmailVars.AGENTMAIL_API_KEY.optional(),
    AGENTMAIL_BASE_URL: agentmailVars.AGENTMAIL_BASE_URL,
    OPERATION_RETENTION_DAYS,
    AGENTMAIL_WEBHOOK_SECRET: webhookSecret,
    PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).default(3000),
    HOST: z.string().trim().min(1).default('127.0.0.1'),
    /**
     * The API's Prometheus endpoint, a listener of its own (never the public PORT). Unset: 9465, or
     * any free port when 9465 is taken (logged); set: exactly that port (0: any free one).
     */
    API_METRICS_PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).optional(),
    /** Where the metrics listener binds: loopback unless a scraper elsewhere must reach it (compose: the container's network). */
    API_METRICS_HOST: z.string().trim().min(1).default('127.0.0.1'),
    /**
     * The intake relay's dead letter: a row whose start Temporal refused this many times, or that
     * has waited INTAKE_DEAD_LETTER_AFTER_MS since it was accepted (or retried), is set aside
     * (docs/operations.md, "The intake relay and the dead letter"). Failures to reach Temporal at
     * all count only against the time: an outage is not the row's fault.
     */
    INTAKE_DEAD_LETTER_AFTER_ATTEMPTS: z.coerce.number().int().min(1).max(100_000).default(20),
    INTAKE_DEAD_LETTER_AFTER_MS: z.coerce
      .number()
      .int()
      .min(60_000)
      .default(24 * 60 * 60_000),
    /** How long the ingress waits for Postgres before answering 500 (AgentMail gives up at 15 s). */
    INGRESS_DEADLINE_MS: z.coerce.number().int().min(100).max(12_000).default(5_000),
    /**
     * Time allowed to receive a whole request, headers and body (Node's requestTimeout; 408 past
     * it). A webhook of a megabyte arrives in milliseconds; a client trickling its body holds a
     * socket only this long.
     */
    INGRESS_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(500).max(60_000).default(5_000),
    /** A socket with no traffic at all for this long is closed (Node's socket timeout). */
    INGRESS_CONNECTION_TIMEOUT_MS: z.coerce.number().int().min(500).max(120_000).default(10_000),
    /**
     * Requests one replica serves at once; past it, 503 with Retry-After (Svix retries it) instead
     * of queueing until the process runs out of memory or every answer misses the 15 s.
     */
    INGRESS_MAX_CONCURRENT_REQUESTS: z.coerce.number().int().min(1).default(512),
    /** Largest webhook body accepted; AgentMail's message events are far below this. */
    WEBHOOK_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(1_048_576),
  })
  .refine((env) => env.ADMIN_TOKEN === undefined || env.AGENTMAIL_API_KEY !== undefined, {
    path: ['AGENTMAIL_API_KEY'],
    message: 'is required when ADMIN_TOKEN is set (POST /admin/replay reads the inbox from AgentMail)',
  })
  .refine((env) => env.REVIEW_PROXY_USER_HEADER === undefined || env.REVIEW_PROXY_SECRET !== undefined, {
    path: ['REVIEW_PROXY_SECRET'],
    message:
      'is required when REVIEW_PROXY_USER_HEADER is set: anyone who reaches the public port could name themselves; have the proxy add it as x-replyonce-proxy-secret (e.g. openssl rand -hex 32)',
  });

const commaList = z
  .string()
  .default('')
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
const booleanFlag = z
  .enum(['true', 'false', '1', '0'])
  .default('true')
  .transform((v) => v === 'true' || v === '1');
const offByDefault = z
  .enum(['true', 'false', '1', '0'])
  .default('false')
  .transform((v) => v === 'true' || v === '1');

/** A signature: plain text (the reply's own rule), short; `\n` written in an environment variable is a line break. */
const signatureText = z
  .string()
  .transform((value) => value.replace(/\\n/g, '\n').trim())
  .superRefine((value, ctx) => {
    const problem = value.length > 1_000 ? 'is longer than 1000 characters' : draftProblem(value);
    if (problem !== null)
      ctx.addIssue({
        code: 'custom',
        message: `${problem}: a signature is plain text, e.g. "The support team\\nExample Ltd"`,
      });
  });

/**
 * When a customer may hear that a person answers. Not at the inbox's hourly ceiling: past it nothing
 * more is sent from the inbox (the circuit breaker), an acknowledgment neither.
 */
export const ACKNOWLEDGMENT_OCCASIONS = ['handoff', 'held', 'approval'] as const;
const acknowledgmentOccasion = z.enum(ACKNOWLEDGMENT_OCCASIONS, {
  error: (issue) =>
    issue.input === 'ceiling'
      ? "has 'ceiling', which is no occasion: past the inbox's hourly ceiling nothing more is sent from it, an acknowledgment neither; use handoff, held or approval"
      : `has ${JSON.stringify(issue.input)}; the occasions are handoff, held and approval`,
});
const ISO_639_1 = /^[a-z]{2}$/;
const languageNames = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });
/** tinyld names Norwegian `no`; people write `nb` or `nn` as often: one language to the rule. */
export const languageAlias = (code: string): string => (code === 'nb' || code === 'nn' ? 'no' : code);

/**
 * Mail as customers write it (issue 37; docs/knowledge.md "Languages, attachments, links and
 * signatures"): which languages the team answers, which attachments the drafter may read and how
 * much of each, and the signature every reply ends with. Read by the draft step and the review's edits.
 */
export const mailVars = {
  /** ISO 639-1 codes the team answers (`en,de,fr`); unset or `*`: any. Others are handed off (`handoff: language`). */
  SUPPORTED_LANGUAGES: z
    .string()
    .default('*')
    .transform((value, ctx): string[] | null => {
      const codes = value
        .split(',')
        .map((code) => code.trim().toLowerCase())
        .filter(Boolean);
      if (codes.length === 0 || (codes.length === 1 && codes[0] === '*')) return null;
      const bad = codes.filter((code) => !ISO_639_1.test(code) || languageNames.of(code) === undefined);
      if (bad.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `has ${bad.map((c) => JSON.stringify(c)).join(', ')}, not ISO 639-1 language codes; give two-letter codes such as en,de,fr (or * for any)`,
        });
        return z.NEVER;
      }
      return [...new Set(codes.map(languageAlias))];
    }),
  /**
   * A topics file (lib/handoff-topics.ts): mail about one of its topics (job applications, press,
   * a legal notice…) is handed to a person before any drafter is asked (`handoff: topic`). Unset:
   * none, except that a worker answering from the bundled help centre loads the topics written for it.
   */
  HANDOFF_TOPICS: z
    .string()
    .optional()
    .transform((value, ctx): HandoffTopic[] | null => {
      if (value === undefined || value.trim() === '') return null;
      try {
        return readHandoffTopics(value.trim());
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: `${(error as Error).message}; one topic a line, e.g. press: journalist, press enquiry, media enquiry`,
        });
        return z.NEVER;
      }
    }),
  /**
   * Labelled mail the hand-offs are learned from (lib/learned-handoffs/): files in the eval's
   * question format (`{"text": …, "expected_sources": […], "handoff": true}`), comma-separated, read
   * at start-up; `none` learns nothing. Unset: a worker answering from the bundled help centre learns
   * from the bundled question sets, any other learns nothing.
   */
  HANDOFF_EXAMPLES: z
    .string()
    .optional()
    .transform((value, ctx): ExampleFile[] | 'none' | null => {
      if (value === undefined || value.trim() === '') return null;
      if (value.trim().toLowerCase() === 'none') return 'none';
      try {
        const files = readExampleFiles(
          value
            .split(',')
            .map((f) => f.trim())
            .filter((f) => f !== ''),
        );
        checkExamples(files.flatMap((f) => f.examples));
        return files;
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: `${(error as Error).message}; give files of labelled mail, one {"text": "…", "expected_sources": [], "handoff": true} a line (the eval's question format), or none`,
        });
        return z.NEVER;
      }
    }),
  /** Which attachment types the drafter reads: `text` (text/plain, csv, …), `pdf` (its text layer); `none` reads none. Images are never read. */
  ATTACHMENT_READERS: z
    .string()
    .default('text,pdf')
    .transform((value, ctx): Array<'text' | 'pdf'> => {
      const names = value
        .split(',')
        .map((name) => name.trim().toLowerCase())
        .filter(Boolean);
      if (names.length === 1 && names[0] === 'none') return [];
      const bad = names.filter((name) => name !== 'text' && name !== 'pdf');
      if (bad.length > 0 || names.length === 0) {
        ctx.addIssue({ code: 'custom', message: 'must list readers among text and pdf (e.g. text,pdf), or be none' });
        return z.NEVER;
      }
      return [...new Set(names)] as Array<'text' | 'pdf'>;
    }),
  /**
   * At most this many kilobytes of one attachment are downloaded: a text file is read from its
   * start up to it; a PDF larger than it is not read (a PDF cut short cannot be parsed).
   */
  ATTACHMENT_READ_MAX_KB: z.coerce.number().int().min(1).max(20_480).default(2_048),
  /**
   * Where a folder's articles live on the web, so the reply can link them: a base URL (collection
   * `default`) or `name=url,name=url`; an article links to the base plus its path without the
   * extension (`returns/window.md` → `<base>returns/window`). An article's front matter `url:` and
   * a page of KNOWLEDGE_URLS (its own address) need none.
   */
  KNOWLEDGE_LINK_BASES: z
    .string()
    .default('')
    .transform((value, ctx): Record<string, string> => {
      const entries = collectionEntries(value);
      const bad = entries.find((entry) => !/^https?:\/\//.test(entry.value) || !URL.canParse(entry.value));
      if (bad) {
        ctx.addIssue({
          code: 'custom',
          message: `has ${JSON.stringify(bad.value)}, not an http(s) URL; e.g. https://help.example.com/articles/ or billing=https://billing.example.com/help/`,
        });
        return z.NEVER;
      }
      return Object.fromEntries(entries.map((entry) => [entry.collection, entry.value.replace(/\/?$/, '/')]));
    }),
  /**
   * A short word back to the customer when a person must answer (lib/business-hours.ts says by
   * when): inbox → the occasions it is sent on, `*` for every other inbox; unset: never.
   * Occasions: `handoff` (the agent did not know), `held` (a draft tripped a rule), `approval` (an
   * approval inbox).
   */
  HANDOFF_ACKNOWLEDGMENT: jsonSetting(
    z.record(z.string().min(1), z.array(acknowledgmentOccasion).min(1)),
    '{"*": ["handoff", "held"], "sales@example.com": ["handoff", "held", "approval"]}',
  ).transform((map) => Object.fromEntries(Object.entries(map).map(([inbox, list]) => [inbox.toLowerCase(), list]))),
  /** Inbox (or `*`) → business hours: a time zone, opening hours per weekday, holidays (lib/business-hours.ts). */
  BUSINESS_HOURS: z
    .string()
    .default('{}')
    .transform((value, ctx): Record<string, BusinessHours> => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(value.trim().startsWith('{') ? value : readFileSync(value, 'utf8'));
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: `is not valid JSON, or names a file that cannot be read (${(error as Error).message}); e.g. ${BUSINESS_HOURS_EXAMPLE}`,
        });
        return z.NEVER;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        ctx.addIssue({ code: 'custom', message: `must be a JSON object of inboxes, e.g. ${BUSINESS_HOURS_EXAMPLE}` });
        return z.NEVER;
      }
      const out: Record<string, BusinessHours> = {};
      for (const [inbox, entry] of Object.entries(parsed)) {
        const hours = parseBusinessHours(entry);
        if (typeof hours === 'string') {
          ctx.addIssue({ code: 'custom', message: `[${JSON.stringify(inbox)}] ${hours}` });
          return z.NEVER;
        }
        out[inbox.toLowerCase()] = hours;
      }
      return out;
    }),
  /** The signature appended to every reply (after the text rule; never the model's to write). `\n` starts a new line. */
  REPLY_SIGNATURE: signatureText.optional(),
  /** Inbox → its own signature, inline JSON or a JSON file, over REPLY_SIGNATURE: {"billing@example.com": "Billing team\\nExample Ltd"}. */
  REPLY_INBOX_SIGNATURES: jsonSetting(
    z.record(z.string().min(3), signatureText),
    '{"billing@example.com": "The billing team\\nExample Ltd"}',
  ).transform((map) => Object.fromEntries(Object.entries(map).map(([inbox, text]) => [inbox.toLowerCase(), text]))),
};

/** A flood past 200 replies an hour from one inbox is no longer customers one agent should answer alone. */
export const DEFAULT_REPLY_CEILING_PER_INBOX_PER_HOUR = 200;
/** A week: past it an answer is late anyway, and a replay of old mail must not answer a customer twice. */
export const DEFAULT_REPLY_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** `7d`, `36h`, `90m`, `30s`, `500ms` (a unit is required: a bare number is ambiguous) → milliseconds. */
export function parseDuration(value: string): number | null {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/i.exec(value.trim());
  if (!match) return null;
  const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
  return Math.round(Number(match[1]) * unitMs[(match[2] ?? 'ms').toLowerCase() as keyof typeof unitMs]);
}
const duration = z.string().transform((value, ctx) => {
  const ms = parseDuration(value);
  if (ms === null || ms <= 0) {
    ctx.addIssue({ code: 'custom', message: 'must be a duration with a unit, e.g. 7d, 36h or 90m' });
    return z.NEVER;
  }
  return ms;
});

/** A JSON object given inline or as the path of a JSON file (like DRAFT_INBOX_INSTRUCTIONS), checked by `shape`. */
function jsonSetting<T extends z.ZodType>(shape: T, example: string) {
  return z
    .string()
    .default('{}')
    .transform((value, ctx): z.output<T> => {
      let text = value;
      if (!value.trim().startsWith('{')) {
        try {
          text = readFileSync(value, 'utf8');
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `names a file that cannot be read (${(error as Error).message})` });
          return z.NEVER;
        }
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: `is not valid JSON; expected e.g. ${example}` });
        return z.NEVER;
      }
      const checked = shape.safeParse(parsed);
      if (!checked.success) {
        const [first] = checked.error.issues;
        const where = first ? ` (${JSON.stringify(first.path.map(String))} ${first.message})` : '';
        ctx.addIssue({ code: 'custom', message: `must be a JSON object like ${example}${where}` });
        return z.NEVER;
      }
      return checked.data;
    });
}

const collectionName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/);

const NAMED = /^([a-z0-9][a-z0-9_-]{0,62})=(.+)$/;

/**
 * KNOWLEDGE_DIR, KNOWLEDGE_URLS and KNOWLEDGE_SYNONYMS: `value,value` or `name=value,name=value`,
 * a bare value filling the collection `default`. A URL's own `=` never looks like a collection name.
 */
export function collectionEntries(list: string | undefined): Array<{ collection: string; value: string }> {
  return (list ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const match = NAMED.exec(part);
      return match ? { collection: match[1]!, value: match[2]!.trim() } : { collection: 'default', value: part };
    });
}

const SYNONYMS_EXAMPLE = '/srv/synonyms.txt, or billing=/srv/billing-synonyms.txt,default=/srv/synonyms.txt';

/** One synonyms file per collection: a file is a collection's whole set of groups, replaced at each sync. */
const synonymFiles = z
  .string()
  .trim()
  .min(1)
  .superRefine((value, ctx) => {
    const collections = collectionEntries(value).map((entry) => entry.collection);
    const twice = collections.find((name, index) => collections.indexOf(name) !== index);
    if (collections.length === 0) ctx.addIssue({ code: 'custom', message: `names no file; e.g. ${SYNONYMS_EXAMPLE}` });
    else if (twice !== undefined)
      ctx.addIssue({
        code: 'custom',
        message: `names collection "${twice}" twice: give each collection one synonyms file, e.g. ${SYNONYMS_EXAMPLE}`,
      });
  });

/**
 * The knowledge base (issue 23, knowledge/): where articles come from, how they are searched, and
 * which inbox may use which collection. Read by the draft step, the sync schedule and the CLIs.
 */
export const knowledgeVars = {
  /** A folder of Markdown/HTML/text articles (collection `default`), or `name=path,name=path`. */
  KNOWLEDGE_DIR: z.string().trim().min(1).optional(),
  /** Pages fetched once per sync (collection `default`), comma-separated; `name=url` for another collection. */
  KNOWLEDGE_URLS: z.string().trim().min(1).optional(),
  /**
   * Synonym groups, read by the sync (not at query time): a file (collection `default`), or
   * `name=path,name=path` (knowledge/synonyms.ts has the format).
   */
  KNOWLEDGE_SYNONYMS: synonymFiles.optional(),
  /** The text-search language of every collection without its own (a Postgres configuration: english, german, simple…). */
  KNOWLEDGE_LANGUAGE: z.string().trim().min(1).default('english'),
  /** Collection → text-search language, e.g. {"de-help": "german"}. */
  KNOWLEDGE_COLLECTION_LANGUAGES: jsonSetting(z.record(collectionName, z.string().min(1)), '{"de-help": "german"}'),
  /** Inbox address → the collections it may use; `*` for every other inbox; unlisted: `default`. */
  KNOWLEDGE_INBOX_COLLECTIONS: jsonSetting(
    z.record(z.string().min(1), z.array(collectionName)),
    '{"billing@example.com": ["billing"], "*": ["default"]}',
  ).transform((map) => Object.fromEntries(Object.entries(map).map(([inbox, list]) => [inbox.toLowerCase(), list]))),
  /**
   * Optional embeddings: an OpenAI-compatible `/v1/embeddings` root (e.g. a local service) and its
   * model. Set both and the sync embeds each section, and retrieval re-ranks the text-search
   * candidates by cosine similarity too. Unset: full-text search alone.
   */
  KNOWLEDGE_EMBEDDINGS_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  KNOWLEDGE_EMBEDDINGS_MODEL: z.string().trim().min(1).optional(),
  KNOWLEDGE_EMBEDDINGS_API_KEY: z.string().trim().min(1).optional(),
  /** How many articles the model is shown (the best section of each). */
  KNOWLEDGE_TOP_K: z.coerce.number().int().min(1).max(20).default(5),
  /**
   * The relevance floor (issue 37, knowledge/relevance-floor.ts): collection → the per-word score
   * below which no article is relevant enough and the drafter hands off; `*` for every other
   * collection. Unlisted: the floor calibrated on the bundled held-out questions.
   */
  KNOWLEDGE_RELEVANCE_FLOORS: jsonSetting(z.record(z.string().min(1), z.number().min(0)), '{"*": 0.3, "billing": 0.4}'),
  /**
   * Where a hand-off goes in an inbox that needs no approval: `review` (waits for a person's
   * verdict like an approval) or `ticket` (a ticket note, no email). Unset: `ticket`.
   */
  HANDOFF: z.enum(['review', 'ticket']).optional(),
};

/**
 * Rehearsals (docs/rehearsal.md): what `npm run rehearse` reads besides the worker's settings, which
 * are the configuration it rehearses.
 */
export const rehearsalVars = {
  /** How long a rehearsal (its drafts, the team's answers beside them) is kept before it is deleted. */
  REHEARSAL_RETENTION: duration.default(30 * 24 * 60 * 60 * 1000),
  /** The model's price in USD per million input tokens, for the report's cost estimate (unset: no estimate). */
  REHEARSAL_INPUT_PRICE_PER_MTOK: z.coerce.number().min(0).optional(),
  /** The same per million output tokens. */
  REHEARSAL_OUTPUT_PRICE_PER_MTOK: z.coerce.number().min(0).optional(),
  /** The report calls a team's answer slow past this (e.g. 2d, 36h): where the agent would have been quicker. */
  REHEARSAL_SLOW_ANSWER: duration.default(2 * 24 * 60 * 60 * 1000),
  /** Labels on our answers at AgentMail that mean the team escalated the conversation (comma-separated). */
  REHEARSAL_ESCALATION_LABELS: z
    .string()
    .default('escalated')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean),
    ),
};

/**
 * What the activities read of the worker's configuration: one validated slice, its defaults here
 * and nowhere else. Each step's dependencies take the part of it they read (`Pick<ActivityConfig, …>`).
 */
const activityVars = {
  OPERATION_RETENTION_DAYS,
  /** Whether the webhook watchdog turns a disabled AgentMail webhook back on (and then catches up). */
  WATCHDOG_REENABLE: offByDefault,
  /**
   * This deployment's webhook URL (what AgentMail posts message.received to, e.g.
   * https://mail.example.com/webhooks/agentmail): the watchdog watches and re-enables only webhooks
   * with this URL (or those of WATCHDOG_WEBHOOK_IDS); others are reported, never changed.
   */
  PUBLIC_WEBHOOK_URL: z
    .url({ error: 'must be an http(s) URL, e.g. https://mail.example.com/webhooks/agentmail' })
    .optional(),
  /** The webhooks the watchdog watches, by id; empty: those whose URL is PUBLIC_WEBHOOK_URL. */
  WATCHDOG_WEBHOOK_IDS: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  /** Extra addresses that are ours (besides the receiving inbox): never answered, to avoid loops. */
  REPLYONCE_OWN_ADDRESSES: commaList,
  /**
   * Domains whose Reply-To is followed whoever wrote (comma-separated; empty by default). Otherwise
   * Reply-To is followed only when it names the sender's own mailbox (activities/agentmail/recipients.ts).
   */
  REPLYONCE_REPLY_TO_DOMAINS: commaList,
  /**
   * Hosts a drafted reply may link to without a person reading it first (comma-separated; a host
   * matches its subdomains too). Empty: the receiving inbox's own domain. Addresses at these
   * domains count as ours in the same check (activities/draft/draft-check.ts).
   */
  DRAFT_ALLOWED_LINK_DOMAINS: commaList,
  // Draft rules, phone numbers (issue 39, point 3): a number the model writes that is neither in
  // its instructions nor in the customer's message holds the draft (activities/draft/draft-check.ts).
  /** Whose national numbers (written without `+`) count as phone numbers, as an ISO 3166 code (`GB`, `DE`). */
  DRAFT_PHONE_REGION: z
    .string()
    .trim()
    .toUpperCase()
    .default('US')
    .refine(isSupportedCountry, 'must be a two-letter country code libphonenumber knows (e.g. US, GB, DE)'),
  /** Replies allowed to one sender address per 24 h before we stop answering (loop safety). */
  REPLY_BUDGET_PER_SENDER: z.coerce.number().int().min(0).default(5),
  /** The inboxes replyonce answers (comma-separated); unset: every inbox of the organisation. */
  REPLYONCE_INBOXES: commaList,
  /** Circuit breaker: past this many replies in an hour, an inbox's messages get a ticket for a person instead. */
  REPLY_CEILING_PER_INBOX_PER_HOUR: z.coerce.number().int().min(0).default(DEFAULT_REPLY_CEILING_PER_INBOX_PER_HOUR),
  /** Messages older than this (e.g. 7d, 36h, 90m) get a ticket, not an automatic reply. */
  REPLY_MAX_AGE: duration.default(DEFAULT_REPLY_MAX_AGE_MS),
  /** Inboxes whose replies wait for a person's approval (comma-separated; `*` for every inbox). */
  APPROVAL_REQUIRED_INBOXES: commaList,
  /** How long a reply waits for approval before it is escalated (it is never sent unapproved). */
  APPROVAL_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .default(24 * 60 * 60 * 1000),
  /** Whether a message we decide not to answer still gets a ticket. */
  TICKET_FOR_SKIPPED: booleanFlag,
  /**
   * Whether robots, lists and bounces (auto-submitted, bulk, auto-responders, mailing lists,
   * bounces, robot senders, our own mail, spam) get a ticket under TICKET_FOR_SKIPPED. Off: none.
   */
  TICKET_FOR_ROBOTS: offByDefault,
  /**
   * Tickets skipped mail may open per inbox per TICKET_FOR_SKIPPED_WINDOW; later skipped messages
   * are counted on the newest of them. (Answered, too-old and ceiling messages always get their own.)
   */
  TICKET_FOR_SKIPPED_PER_INBOX: z.coerce.number().int().min(1).default(1),
  TICKET_FOR_SKIPPED_WINDOW: duration.default(24 * 60 * 60 * 1000),
  /**
   * Past this age a send whose outcome is unknown reconciles from the thread before retrying:
   * AgentMail forgets an Idempotency-Key 24 h after the send completed, so an hour of margin.
   */
  SEND_RECONCILE_AFTER_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(23 * 60 * 60 * 1000),
  /**
   * How long an operation claim stays exclusive without renewal (renewed every third of it).
   * After a worker crash the next attempt waits at most this long before taking the effect over.
   */
  OPERATION_LEASE_MS: z.coerce.number().int().min(1_000).default(15_000),
  ...knowledgeVars,
  ...mailVars,
  /**
   * Conversations: how long after a thread's newest unanswered message its turn waits for the
   * customer to go on writing, so a burst ("Where is my order?" … "Also, can I change the
   * address?") is answered once. Counted from the message's timestamp; 0 answers at once.
   */
  REPLY_COALESCE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(60 * 60 * 1000)
    .default(30_000),
  // Conversations (issue #34, docs/conversations.md).
  /**
   * A message waiting for its thread's turn asks again after this long at most (sooner when its
   * thread's turn is due sooner; twice as long each time, up to 15 min): a turn whose signal was lost
   * in a crash is heard then, and a holder an operator terminated is found closed.
   */
  TURN_REASK_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .max(60 * 60 * 1000)
    .default(60_000),
  /**
   * A teammate's answer in a thread stops automatic replies to it until a person hands it back
   * (`npm run handback`, the desk); with this set (a duration: 3d, 12h), also once the teammate's
   * last message is this old. Unset: only a person hands a thread back.
   */
  HANDBACK_AFTER: duration.optional(),
  /** A Slack-compatible incoming webhook told when a reply starts waiting for a person, and when it is escalated. */
  REVIEW_NOTIFY_WEBHOOK_URL: z.url({ error: 'must be an http(s) URL' }).optional(),
  /** An address told the same by email, sent through AgentMail from the message's own inbox. */
  REVIEW_NOTIFY_ADDRESS: z.email({ error: 'must be an email address' }).optional(),
  /** Whether a notification carries the customer's subject and words and the draft (off: ids and a link only). */
  REVIEW_NOTIFY_INCLUDE_TEXT: offByDefault,
  /** The review desk's address as reviewers reach it: the link in every notification. */
  DESK_PUBLIC_URL: z.url({ error: 'must be an http(s) URL' }).default('http://127.0.0.1:3300'),
  ...rehearsalVars,
};
const activitySchema = z.object(activityVars);
export type ActivityConfig = z.output<typeof activitySchema>;

/** The activities' configuration with every default, changed only where `overrides` says (tests, tools). */
export const activityConfig = (overrides: Partial<ActivityConfig> = {}): ActivityConfig => ({
  ...activitySchema.parse({}),
  ...overrides,
});

const workerSchema = z
  .object({
    ...commonVars,
    ...agentmailVars,
    ...activityVars,
    ...draftingVars,
    ...ticketVars,
    /** The worker's Prometheus endpoint. Unset: 9464, or any free port when 9464 is taken (logged); set: exactly that port (0: any free one). */
    METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    METRICS_HOST: z.string().trim().min(1).default('127.0.0.1'),
    WORKER_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).default(50),
    /**
     * The worker's CPU priority as a nice value (0–19; 0: unchanged). Where it shares cores with
     * the API, the webhook's answer goes first and the worker takes the rest (worker/cpu-priority.ts).
     */
    WORKER_NICE: z.coerce.number().int().min(0).max(19).default(10),
    /** How often the knowledge schedule re-syncs KNOWLEDGE_DIR/KNOWLEDGE_URLS (e.g. 1h, 30m), or `off`. */
    KNOWLEDGE_SYNC_INTERVAL: z
      .string()
      .default('1h')
      .transform((value, ctx) => {
        if (value.trim().toLowerCase() === 'off') return null;
        const ms = parseDuration(value);
        if (ms === null || ms < 60_000) {
          ctx.addIssue({ code: 'custom', message: 'must be a duration of at least a minute (e.g. 1h, 30m) or off' });
          return z.NEVER;
        }
        return ms;
      }),
    /** Worker Versioning: the deployment this worker belongs to (docs/changing-the-workflow.md). */
    WORKER_DEPLOYMENT_NAME: z
      .string()
      .trim()
      .regex(/^[^.:]+$/, "must not contain '.' or ':' (Temporal's version separators)")
      .default('replyonce'),
    /** The worker's build id; unset: the package version and the git commit (worker/deployment.ts). */
    WORKER_BUILD_ID: z.string().trim().min(1).optional(),
    /**
     * Make this worker's version current as soon as it polls. For `npm run dev` and the tests; in
     * production a release is promoted with `npm run deploy -- promote <build>`.
     */
    WORKER_PROMOTE_ON_START: offByDefault,
  })
  .superRefine(checkProviderSettings, { when: () => true });

/** `npm run knowledge:sync` and `npm run eval`: Postgres and the knowledge settings (eval: the drafter's too). */
const knowledgeSchema = z
  .object({ DATABASE_URL: postgresUrl, LOG_LEVEL: commonVars.LOG_LEVEL, ...knowledgeVars, ...draftingVars })
  .superRefine(checkProviderSettings, { when: () => true });
export type KnowledgeConfig = z.infer<typeof knowledgeSchema>;
/** The review desk (desk/): its own listener, loopback by default, never the webhook port. */
const deskSchema = z.object({
  ...commonVars,
  ...agentmailVars,
  DESK_PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).default(3300),
  DESK_HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** Where reviewers reach the desk; https here makes its cookies Secure. */
  DESK_PUBLIC_URL: z.url({ error: 'must be an http(s) URL' }).default('http://127.0.0.1:3300'),
  /** Behind a TLS-terminating proxy: trust its X-Forwarded-Proto (cookies Secure when it says https). */
  DESK_TRUST_PROXY: offByDefault,
  /** How long a sign-in lasts (e.g. 12h, 30m). */
  DESK_SESSION_TTL: duration.default(12 * 60 * 60 * 1000),
  /** Sign-in attempts allowed per client address per minute. */
  DESK_SIGNIN_ATTEMPTS_PER_MINUTE: z.coerce.number().int().min(1).default(10),
});

/** `npm run replay`: Temporal to start workflows, Postgres for the cursors, AgentMail to list the inbox. */
const replaySchema = z.object({ ...commonVars, ...agentmailVars, OPERATION_RETENTION_DAYS });

// Erasure (issue 36, `npm run forget`, privacy/): Postgres and AgentMail to find and erase a
// customer's messages, Temporal to end open runs and check histories, and which help desk holds
// the tickets (Postgres's are emptied; Zendesk's deleted with the ZENDESK_* settings, else listed).
const forgetSchema = z.object({ ...commonVars, ...agentmailVars, ...ticketVars });
export type ForgetConfig = z.infer<typeof forgetSchema> & WithTemporal;

/** Every process that talks to Temporal gets the checked connection beside its variables. */
interface WithTemporal {
  temporal: TemporalConnectionSettings;
  /** The namespace the connection names (TEMPORAL_NAMESPACE or the profile's), kept under its variable's name. */
  TEMPORAL_NAMESPACE: string;
}

export type ApiConfig = z.infer<typeof apiSchema> & WithTemporal;
export type ReplayConfig = z.infer<typeof replaySchema> & WithTemporal;
export type DeskConfig = z.infer<typeof deskSchema> & WithTemporal;
export type WorkerConfig = z.infer<typeof workerSchema> & WithTemporal;
export type TemporalConfig = z.infer<z.ZodObject<typeof temporalVars>> & WithTemporal;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function parseEnv<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv,
  processName: string,
): z.infer<S> & WithTemporal {
  // Empty strings mean "unset": shells and .env files often export VAR= for defaults.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  const temporal = loadTemporalConnection(cleaned);
  const problems = [
    ...(temporal.ok ? [] : temporal.problems.map((problem) => `  - ${problem}`)),
    ...(parsed.success
      ? []
      : parsed.error.issues.map((issue) => `  - ${issue.path.join('.') || '(environment)'} ${issue.message}`)),
  ];
  if (parsed.success && temporal.ok) {
    return {
      ...(parsed.data as object),
      temporal: temporal.settings,
      TEMPORAL_NAMESPACE: temporal.settings.namespace,
    } as z.infer<S> & WithTemporal;
  }
  throw new ConfigError(
    `The ${processName} cannot start: its configuration is invalid.\n${problems.join('\n')}\n` +
      'Set these environment variables (see docs/configuration.md) and start it again.',
  );
}

export const loadApiConfig = (env: NodeJS.ProcessEnv = process.env): ApiConfig => parseEnv(apiSchema, env, 'API');
export const loadWorkerConfig = (env: NodeJS.ProcessEnv = process.env): WorkerConfig =>
  parseEnv(workerSchema, env, 'worker');
export const loadForgetConfig = (env: NodeJS.ProcessEnv = process.env): ForgetConfig =>
  parseEnv(forgetSchema, env, 'forget');
export const loadReplayConfig = (env: NodeJS.ProcessEnv = process.env): ReplayConfig =>
  parseEnv(replaySchema, env, 'replay');
export function loadKnowledgeConfig(env: NodeJS.ProcessEnv = process.env): KnowledgeConfig {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = knowledgeSchema.safeParse(cleaned);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    `The knowledge tools cannot start: their configuration is invalid.\n${parsed.error.issues
      .map((issue) => `  - ${issue.path.join('.') || '(environment)'} ${issue.message}`)
      .join('\n')}\nSet these environment variables (docs/knowledge.md) and run it again.`,
  );
}
export const loadDeskConfig = (env: NodeJS.ProcessEnv = process.env): DeskConfig =>
  parseEnv(deskSchema, env, 'review desk');
/** The connection alone: `npm run temporal:setup`, the dev and test runners, the compose check. */
export const loadTemporalConfig = (env: NodeJS.ProcessEnv = process.env): TemporalConfig =>
  parseEnv(z.object(temporalVars), env, 'Temporal set-up');

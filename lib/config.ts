import { z } from 'zod';

/**
 * Configuration comes from the environment and is validated once at start-up, so a
 * missing or malformed variable stops the process with a message naming it instead of
 * failing on the first webhook. Each process reads only the variables it needs.
 */

const nonEmpty = (hint: string) => z.string({ error: `is required (${hint})` }).trim().min(1, `is required (${hint})`);

const postgresUrl = nonEmpty('e.g. postgres://user:password@127.0.0.1:5432/replyonce').refine(
  (value) => /^postgres(ql)?:\/\//.test(value) && URL.canParse(value),
  'must be a postgres:// URL, e.g. postgres://user:password@127.0.0.1:5432/replyonce',
);

const temporalVars = {
  TEMPORAL_ADDRESS: z.string().trim().min(1).default('localhost:7233')
    .refine((v) => /^[^\s:/]+:\d{1,5}$/.test(v), 'must be host:port, e.g. localhost:7233'),
  TEMPORAL_NAMESPACE: z.string().trim().min(1).default('replyonce'),
  TEMPORAL_TASK_QUEUE: z.string().trim().min(1).default('replyonce'),
};

const commonVars = {
  ...temporalVars,
  DATABASE_URL: postgresUrl,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
};

const apiSchema = z.object({
  ...commonVars,
  AGENTMAIL_WEBHOOK_SECRET: nonEmpty('the webhook signing secret, whsec_…').refine(
    (v) => v.startsWith('whsec_'),
    'must be the Svix signing secret AgentMail shows for the webhook, starting with whsec_',
  ),
  PORT: z.coerce.number({ error: 'must be a port number' }).int().min(0).max(65535).default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  /** How long the ingress waits for Postgres or Temporal before answering 500 (AgentMail gives up at 15 s). */
  INGRESS_DEADLINE_MS: z.coerce.number().int().min(100).max(12_000).default(5_000),
  /** Largest webhook body accepted; AgentMail's message events are far below this. */
  WEBHOOK_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(1_048_576),
});

const commaList = z.string().default('').transform((v) => v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean));
const booleanFlag = z.enum(['true', 'false', '1', '0']).default('true').transform((v) => v === 'true' || v === '1');

const workerSchema = z.object({
  ...commonVars,
  AGENTMAIL_API_KEY: nonEmpty('the AgentMail API key the worker sends and reads mail with'),
  /** Unset means AgentMail's production API; the local sandbox sets it to its own address. */
  AGENTMAIL_BASE_URL: z.url({ error: 'must be an http(s) URL' }).optional(),
  DRAFT_PROVIDER: z.enum(['offline']).default('offline'),
  /** Extra addresses that are ours (besides the receiving inbox): never answered, to avoid loops. */
  REPLYONCE_OWN_ADDRESSES: commaList,
  /** Replies allowed to one sender address per 24 h before we stop answering (loop safety). */
  REPLY_BUDGET_PER_SENDER: z.coerce.number().int().min(0).default(5),
  /** Inboxes whose replies wait for a person's approval (comma-separated; `*` for every inbox). */
  APPROVAL_REQUIRED_INBOXES: commaList,
  /** How long a reply waits for approval before it is escalated (it is never sent unapproved). */
  APPROVAL_TIMEOUT_MS: z.coerce.number().int().min(1_000).default(24 * 60 * 60 * 1000),
  /** Whether a message we decide not to answer still gets a ticket. */
  TICKET_FOR_SKIPPED: booleanFlag,
  /**
   * Past this age a send whose outcome is unknown reconciles from the thread before retrying:
   * AgentMail forgets an Idempotency-Key 24 h after the send completed, so an hour of margin.
   */
  SEND_RECONCILE_AFTER_MS: z.coerce.number().int().min(0).default(23 * 60 * 60 * 1000),
  /**
   * How long an operation claim stays exclusive without renewal (renewed every third of it).
   * After a worker crash the next attempt waits at most this long before taking the effect over.
   */
  OPERATION_LEASE_MS: z.coerce.number().int().min(1_000).default(15_000),
  WORKER_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).default(50),
});

export type ApiConfig = z.infer<typeof apiSchema>;
export type WorkerConfig = z.infer<typeof workerSchema>;
export type TemporalConfig = z.infer<z.ZodObject<typeof temporalVars>>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv, processName: string): z.infer<S> {
  // Empty strings mean "unset": shells and .env files often export VAR= for defaults.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(cleaned);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `  - ${issue.path.join('.') || '(environment)'} ${issue.message}`);
  throw new ConfigError(
    `The ${processName} cannot start: its configuration is invalid.\n${problems.join('\n')}\n` +
      'Set these environment variables (see the configuration table in README.md) and start it again.',
  );
}

export const loadApiConfig = (env: NodeJS.ProcessEnv = process.env): ApiConfig => parseEnv(apiSchema, env, 'API');
export const loadWorkerConfig = (env: NodeJS.ProcessEnv = process.env): WorkerConfig => parseEnv(workerSchema, env, 'worker');
export const loadTemporalConfig = (env: NodeJS.ProcessEnv = process.env): TemporalConfig =>
  parseEnv(z.object(temporalVars), env, 'Temporal set-up');

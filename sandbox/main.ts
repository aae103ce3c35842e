import { z } from 'zod';
import { createLogger } from '../lib/logger';
import { buildSandbox } from './app';

/**
 * `tsx sandbox/main.ts`: the sandbox as a process for local development. Configuration comes
 * from the environment and is checked once, with the offending variable named.
 */
const PORT = 'must be a port number (0-65535)';
const envSchema = z.object({
  SANDBOX_PORT: z.coerce.number({ error: PORT }).pipe(z.int(PORT).min(0, PORT).max(65535, PORT)).default(4010),
  SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
  AGENTMAIL_API_KEY: z.string().min(1, 'is required'),
  AGENTMAIL_WEBHOOK_SECRET: z.string().startsWith('whsec_', 'must start with whsec_'),
  SANDBOX_WEBHOOK_URL: z.url().optional(),
  /** Comma-separated delays (ms) before each delivery attempt; Svix's real schedule when unset. */
  SANDBOX_RETRY_SCHEDULE_MS: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be comma-separated milliseconds, e.g. 0,200,1000')
    .transform((v) => v.split(',').map(Number))
    .optional(),
});

/** Svix's schedule (docs.svix.com/retries): ~27.5 h from first attempt to last. */
const SVIX_SCHEDULE_MS = [0, 5_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 5 * 3600_000, 10 * 3600_000, 10 * 3600_000];

function readEnv(): z.output<typeof envSchema> {
  // Empty strings mean "unset", as in most .env files.
  const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== ''));
  const parsed = envSchema.safeParse(env);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    const name = issue.path.join('.');
    const message = env[name] === undefined ? 'is required' : issue.message;
    process.stderr.write(`sandbox: ${name} ${message}\n`);
  }
  process.exit(1);
}

async function main(): Promise<void> {
  const env = readEnv();
  // The same logger as the app's processes: pretty lines beside theirs under `npm run dev` (LOG_FORMAT).
  const logger = createLogger('sandbox');
  const { app } = buildSandbox({
    apiKey: env.AGENTMAIL_API_KEY,
    webhookSecret: env.AGENTMAIL_WEBHOOK_SECRET,
    webhookUrl: env.SANDBOX_WEBHOOK_URL,
    retryScheduleMs: env.SANDBOX_RETRY_SCHEDULE_MS ?? SVIX_SCHEDULE_MS,
    logger,
  });

  let closing = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'sandbox closing');
    app.close().then(
      () => process.exit(0),
      (error: unknown) => {
        app.log.error({ err: error }, 'sandbox failed to close');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);

  await app.listen({ port: env.SANDBOX_PORT, host: env.SANDBOX_HOST });
}

main().catch((error: unknown) => {
  process.stderr.write(`sandbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

import pino from 'pino';
import { z } from 'zod';
import { buildModelStandIn } from './app';

/**
 * `tsx sandbox/model/main.ts`: the model stand-in as a process, for local development. Point the
 * worker at it with DRAFT_PROVIDER=openai-compatible DRAFT_BASE_URL=http://127.0.0.1:4020/v1
 * DRAFT_MODEL=stand-in (or DRAFT_PROVIDER=anthropic with any DRAFT_API_KEY).
 */
const PORT = 'must be a port number (0-65535)';
const env = z
  .object({
    MODEL_STANDIN_PORT: z.coerce.number({ error: PORT }).pipe(z.int(PORT).min(0, PORT).max(65535, PORT)).default(4020),
    MODEL_STANDIN_HOST: z.string().min(1).default('127.0.0.1'),
    MODEL_STANDIN_API_KEY: z.string().min(1).optional(),
  })
  .safeParse(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== '')));
if (!env.success) {
  for (const issue of env.error.issues)
    process.stderr.write(`model stand-in: ${issue.path.join('.')} ${issue.message}\n`);
  process.exit(1);
}

const { app } = buildModelStandIn({
  apiKey: env.data.MODEL_STANDIN_API_KEY,
  logger: pino({ level: process.env.LOG_LEVEL ?? 'info' }),
});
const stop = () => void app.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
app.listen({ port: env.data.MODEL_STANDIN_PORT, host: env.data.MODEL_STANDIN_HOST }).catch((error: unknown) => {
  process.stderr.write(`model stand-in: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

import pino from 'pino';
import { z } from 'zod';
import { buildHelpdeskStandIn } from './app';

/**
 * `tsx sandbox/helpdesk/main.ts`: the Zendesk stand-in as a process, for local development. Point
 * the worker at it with TICKET_PROVIDER=zendesk ZENDESK_URL=http://127.0.0.1:4030 and the same
 * ZENDESK_EMAIL / ZENDESK_API_TOKEN as here.
 */
const PORT = 'must be a port number (0-65535)';
const env = z
  .object({
    HELPDESK_STANDIN_PORT: z.coerce
      .number({ error: PORT })
      .pipe(z.int(PORT).min(0, PORT).max(65535, PORT))
      .default(4030),
    HELPDESK_STANDIN_HOST: z.string().min(1).default('127.0.0.1'),
    ZENDESK_EMAIL: z.string().min(3).default('agent@example.com'),
    ZENDESK_API_TOKEN: z.string().min(1).default('dev-token'),
  })
  .safeParse(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== '')));
if (!env.success) {
  for (const issue of env.error.issues)
    process.stderr.write(`help-desk stand-in: ${issue.path.join('.')} ${issue.message}\n`);
  process.exit(1);
}

const { app } = buildHelpdeskStandIn({
  email: env.data.ZENDESK_EMAIL,
  apiToken: env.data.ZENDESK_API_TOKEN,
  logger: pino({ level: process.env.LOG_LEVEL ?? 'info', redact: ['req.headers.authorization'] }),
});
const stop = () => void app.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
app.listen({ port: env.data.HELPDESK_STANDIN_PORT, host: env.data.HELPDESK_STANDIN_HOST }).catch((error: unknown) => {
  process.stderr.write(`help-desk stand-in: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

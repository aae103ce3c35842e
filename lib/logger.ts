import pino from 'pino';

/**
 * Structured JSON logs. Secrets, email bodies and customers' addresses never reach them:
 * logs carry event IDs, workflow IDs and operation keys. The redaction list is a second
 * line of defence for fields that should never have been logged in the first place.
 */
export const redactedPaths = [
  'req.headers.authorization',
  'req.headers["svix-signature"]',
  '*.apiKey',
  '*.webhookSecret',
  '*.AGENTMAIL_API_KEY',
  '*.AGENTMAIL_WEBHOOK_SECRET',
  '*.DATABASE_URL',
  '*.text',
  '*.html',
  '*.from',
  '*.to',
];

export type Logger = pino.Logger;

export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, redact: { paths: redactedPaths, censor: '[redacted]' } });
}

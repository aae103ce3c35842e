import pino from 'pino';
import { activeTraceIds, tracingEnabled } from './tracing';

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
  '*.DRAFT_API_KEY',
  '*.ZENDESK_API_TOKEN',
  '*.apiToken',
  '*.text',
  '*.html',
  '*.from',
  '*.to',
];

export type Logger = pino.Logger;

/**
 * Written synchronously: a line logged just before a crash (an effect started, a model called)
 * is on stdout when the process dies, which is when it matters most. With tracing on (lib/tracing.ts,
 * started before the logger), a line logged inside a span carries its `trace_id` and `span_id`.
 */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      name,
      level,
      redact: { paths: redactedPaths, censor: '[redacted]' },
      ...(tracingEnabled() ? { mixin: () => activeTraceIds() ?? {} } : {}),
    },
    pino.destination({ dest: 1, sync: true }),
  );
}

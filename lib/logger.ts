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
  '*.ZENDESK_MARKER_SECRET',
  '*.apiToken',
  '*.markerSecret',
  '*.text',
  '*.html',
  '*.from',
  '*.to',
];

export type Logger = pino.Logger;

export type LogFormat = 'json' | 'pretty';

/**
 * Written synchronously: a line logged just before a crash (an effect started, a model called)
 * is on stdout when the process dies, which is when it matters most. With tracing on (lib/tracing.ts,
 * started before the logger), a line logged inside a span carries its `trace_id` and `span_id`.
 *
 * `format` (LOG_FORMAT): `json` by default; `pretty` prints for a person through pino-pretty, a
 * development dependency — where it is not installed (a production install) the logger warns once
 * and writes JSON.
 */
export function createLogger(
  name: string,
  level = process.env.LOG_LEVEL ?? 'info',
  format: LogFormat = process.env.LOG_FORMAT === 'pretty' ? 'pretty' : 'json',
): Logger {
  const pretty = format === 'pretty' ? prettyStream() : undefined;
  const logger = pino(
    {
      name,
      level,
      redact: { paths: redactedPaths, censor: '[redacted]' },
      ...(tracingEnabled() ? { mixin: () => activeTraceIds() ?? {} } : {}),
    },
    pretty ?? pino.destination({ dest: 1, sync: true }),
  );
  if (format === 'pretty' && !pretty) {
    logger.warn('LOG_FORMAT=pretty needs pino-pretty, a development dependency not installed here: logging JSON');
  }
  return logger;
}

/** pino-pretty's synchronous stream, or undefined when the package is missing. */
function prettyStream(): pino.DestinationStream | undefined {
  let build: (options: Record<string, unknown>) => pino.DestinationStream;
  try {
    // Required lazily: production installs (npm ci --omit=dev) do not have it.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    build = require('pino-pretty') as typeof build;
  } catch {
    return undefined;
  }
  return build({
    destination: 1,
    sync: true,
    colorize: process.stdout.isTTY,
    translateTime: 'SYS:HH:MM:ss.l',
    // One line a message, without what is the same on every line of a process.
    singleLine: true,
    ignore: 'pid,hostname,sdkComponent,taskQueue,namespace,runId,workflowRunId,workflowType,isLocal',
  });
}

/** The Temporal SDK's log levels (its LogLevel), in the worker's Runtime logger. */
export type SdkLogLevel = 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

/** Lines the SDK writes at info that say nothing a person follows: demoted to debug. */
const SDK_CHATTER = new Set(['Worker state changed', 'No Nexus services registered, not polling for Nexus tasks']);

/**
 * One line of the Temporal SDK's own logs (and of activities' and workflows' `log`) written through
 * pino. At info and above: without the ~200-character `taskToken` an activity's line carries, with
 * the SDK's state changes at debug, and with an `error` it passed (an Error object, which pino would
 * print as `{}`) said as `failureType` and `error` (its message) — "Workflow failed" says why.
 */
export function forwardSdkLog(
  logger: Logger,
  entry: { level: SdkLogLevel; message: string; meta?: Record<string, unknown> | undefined },
): void {
  const verbose = logger.isLevelEnabled('debug');
  const demoted = entry.level === 'INFO' && SDK_CHATTER.has(entry.message);
  const level = demoted ? 'debug' : (entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error');
  if (!logger.isLevelEnabled(level)) return;
  const meta: Record<string, unknown> = { ...(entry.meta ?? {}) };
  if (!verbose) delete meta.taskToken;
  const error = meta.error;
  if (isErrorLike(error)) {
    // "Activity task failed" says little: the failure under an activity's (or child's) is the one to name.
    let cause: ErrorLike = error;
    while (WRAPPERS.has(String(cause.name)) && isErrorLike(cause.cause)) cause = cause.cause;
    meta.failureType = failureTypeOf(cause);
    meta.error = cause.message;
    if (cause !== error) meta.via = String(error.name);
    if (verbose && typeof error.stack === 'string') meta.stack = error.stack;
  }
  logger[level](meta, entry.message);
}

/** Temporal failures that only wrap the one that matters. */
const WRAPPERS = new Set(['ActivityFailure', 'ChildWorkflowFailure']);

interface ErrorLike {
  name?: unknown;
  message: string;
  type?: unknown;
  cause?: unknown;
  stack?: unknown;
}

/** An Error, also one made in the workflow sandbox's own context (where `instanceof Error` is false). */
function isErrorLike(value: unknown): value is ErrorLike {
  return typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string';
}

/** An ApplicationFailure's `type`, else the error's name. */
function failureTypeOf(error: ErrorLike): string {
  if (typeof error.type === 'string' && error.type !== '') return error.type;
  return typeof error.name === 'string' ? error.name : 'Error';
}

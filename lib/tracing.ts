import { SpanKind, SpanStatusCode, trace, type Attributes, type AttributeValue } from '@opentelemetry/api';
import type * as FastifyOtel from '@fastify/otel';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as Instrumentation from '@opentelemetry/instrumentation';
import type * as HttpInstrumentation from '@opentelemetry/instrumentation-http';
import type * as PgInstrumentation from '@opentelemetry/instrumentation-pg';
import type * as UndiciInstrumentation from '@opentelemetry/instrumentation-undici';
import type * as Resources from '@opentelemetry/resources';
import type { Resource } from '@opentelemetry/resources';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, Span, SpanProcessor, TimedEvent } from '@opentelemetry/sdk-trace-base';
import type * as TraceNode from '@opentelemetry/sdk-trace-node';
import type * as Semconv from '@opentelemetry/semantic-conventions';
// The helpers alone: the package's index also loads its worker plugin, which the API has no use for.
import { headersWithContext, WORKFLOW_ID_ATTR_KEY } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import type { Payload } from '@temporalio/common';

/**
 * OpenTelemetry for the API and the worker: one trace per message, from the webhook's HTTP span
 * through the workflow start, the workflow, each activity and its provider calls.
 *
 * Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: then no
 * SDK starts, no module is patched, and the helpers below return at their first line. On, the
 * standard variables apply: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
 * (and `_ARG`), `OTEL_EXPORTER_OTLP_*` (OTLP over HTTP with JSON bodies).
 *
 * Spans follow the logs' rule: no bodies, drafted text, addresses or secrets. The instrumentations
 * record none of the first two; URLs name inboxes (`/v0/inboxes/support@…/messages/…`) and error
 * messages may quote an address, so every span passes a redacting processor before export.
 */

export interface Tracing {
  /** The processor every span passes (workflow spans too, through the worker's sink). */
  readonly spanProcessor: SpanProcessor;
  readonly resource: Resource;
  /** Flushes what is buffered and stops exporting. */
  shutdown(): Promise<void>;
}

let active: Tracing | undefined;

/** Probes and scrapes are not messages: a trace per scrape would bury the ones that matter. */
const PROBES = /^\/(metrics|healthz|readyz)\b/;

/** Whether tracing was started in this process (cheap: the hot path's guard). */
export const tracingEnabled = (): boolean => active !== undefined;

export const activeTracing = (): Tracing | undefined => active;

/** True when the environment asks for traces (an OTLP endpoint is set and the SDK is not disabled). */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts the SDK and the instrumentations when the environment asks for traces. It must run before
 * `fastify`, `pg` and `http` are first required (the instrumentations patch them as they load), so
 * the processes call it from their `instrumentation.ts`, the first import of their `main.ts`.
 */
export function startTracing(defaultServiceName: string, env: NodeJS.ProcessEnv = process.env): Tracing | undefined {
  if (active || !tracingRequested(env)) return active;
  // The SDK is loaded only now: with tracing off, none of its modules is even read.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { detectResourcesSync, envDetectorSync, Resource } = require('@opentelemetry/resources') as typeof Resources;
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base') as typeof TraceBase;
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node') as typeof TraceNode;
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp;
  const { registerInstrumentations } = require('@opentelemetry/instrumentation') as typeof Instrumentation;
  const http = require('@opentelemetry/instrumentation-http') as typeof HttpInstrumentation;
  const undici = require('@opentelemetry/instrumentation-undici') as typeof UndiciInstrumentation;
  const pg = require('@opentelemetry/instrumentation-pg') as typeof PgInstrumentation;
  const { FastifyOtelInstrumentation } = require('@fastify/otel') as typeof FastifyOtel;
  const { ATTR_SERVICE_NAME } = require('@opentelemetry/semantic-conventions') as typeof Semconv;
  /* eslint-enable @typescript-eslint/no-require-imports */

  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the process's own name.
  const resource = Resource.default()
    .merge(new Resource({ [ATTR_SERVICE_NAME]: defaultServiceName }))
    .merge(detectResourcesSync({ detectors: [envDetectorSync] }));
  const spanProcessor = new RedactingSpanProcessor(new BatchSpanProcessor(new OTLPTraceExporter()));
  // The sampler comes from OTEL_TRACES_SAMPLER (default: parent-based, always on).
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register(); // AsyncLocalStorage context, W3C trace context propagation
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new http.HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => PROBES.test(request.url ?? ''),
      }),
      new undici.UndiciInstrumentation(), // fetch: the AgentMail SDK, the model provider, the helpdesk
      new pg.PgInstrumentation({ requireParentSpan: true }), // the operation store, inside a message's trace
    ],
  });
  // Fastify's own instrumentation registers itself on every Fastify instance as it initialises (a
  // diagnostics channel, no patching: Fastify 5's named exports stay intact). It has its own
  // version of the instrumentation base, so it is wired here rather than by registerInstrumentations.
  const fastify = new FastifyOtelInstrumentation({
    registerOnInitialization: true,
    ignorePaths: (route) => PROBES.test(route.url),
    // Fastify's request span alone: a span per lifecycle hook and one for the handler say nothing the
    // request span does not, and the duplicate path would pay for each. The route's onResponse then
    // runs in the HTTP server span (the trace's root), which gets the outcome.
    instrumentHooks: false,
    instrumentHandler: false,
  });
  fastify.setTracerProvider(provider);
  active = {
    spanProcessor,
    resource,
    shutdown: async () => {
      unregister();
      fastify.disable();
      await provider.shutdown();
      active = undefined;
    },
  };
  return active;
}

/** The tracer of our own spans (the workflow start, the activity annotations). */
const tracer = () => trace.getTracer('replyonce');

/** Sets attributes on the active span, if tracing is on and a span is active. */
export function annotateActiveSpan(attributes: Attributes): void {
  if (!active) return;
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** The active span's ids for a log line (`trace_id`, `span_id`), or nothing. */
export function activeTraceIds(): { trace_id: string; span_id: string } | undefined {
  if (!active) return undefined;
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/**
 * The Temporal header fields that carry the active trace context, encoded exactly as the client
 * interceptor of `@temporalio/interceptors-opentelemetry` encodes them, so the workflow interceptor
 * extracts them; undefined when tracing is off.
 */
export function traceHeaders(): Record<string, Payload> | undefined {
  if (!active) return undefined;
  return headersWithContext({});
}

/**
 * Wraps a raw StartWorkflowExecution (which the client interceptor does not see) in the span the
 * interceptor would have made, and hands the call the header to send. Off: calls `start` at once.
 */
export async function traceWorkflowStart<T extends { started: boolean }>(
  target: { workflowId: string; workflowType: string },
  start: (header: { fields: Record<string, Payload> } | undefined) => Promise<T>,
): Promise<T> {
  if (!active) return start(undefined);
  return tracer().startActiveSpan(
    `StartWorkflow:${target.workflowType}`,
    { kind: SpanKind.CLIENT, attributes: { [WORKFLOW_ID_ATTR_KEY]: target.workflowId } },
    async (span) => {
      try {
        const outcome = await start({ fields: traceHeaders() ?? {} });
        span.setAttribute('replyonce.workflow.started', outcome.started);
        return outcome;
      } catch (error) {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Redaction: the last line of defence before a span leaves the process.

/**
 * A token with an `@` (raw or percent-encoded) after at least one character: an address, or a
 * Message-ID naming a host. A leading `@` (a package scope such as `@fastify/otel`) is left alone.
 */
const ADDRESS_LIKE = /[^\s/?&=#"'<>,;:()[\]@]+(?:@|%40)[^\s/?&=#"'<>,;:()[\]]*/gi;
/** Attribute names that may hold credentials, whatever their value looks like. */
const SECRET_KEY = /authorization|api[-_.]?key|secret|password|passwd|token|cookie/i;

export const REDACTED = '[redacted]';

export function redactValue(value: AttributeValue): AttributeValue {
  if (typeof value === 'string') return value.replace(ADDRESS_LIKE, REDACTED);
  if (Array.isArray(value))
    return value.map((item) =>
      typeof item === 'string' ? item.replace(ADDRESS_LIKE, REDACTED) : item,
    ) as AttributeValue;
  return value;
}

export function redactAttributes(attributes: Attributes): Attributes {
  const redacted: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined) continue;
    redacted[key] = SECRET_KEY.test(key) ? REDACTED : redactValue(value);
  }
  return redacted;
}

/**
 * Hands the exporter a view of each ended span with its name, attributes, events and status
 * message redacted. The view's prototype is the span itself, so everything else reads through.
 */
export class RedactingSpanProcessor implements SpanProcessor {
  constructor(private readonly next: SpanProcessor) {}

  onStart(span: Span, parentContext: Parameters<SpanProcessor['onStart']>[1]): void {
    this.next.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    const events: TimedEvent[] = span.events.map((event) =>
      event.attributes ? { ...event, attributes: redactAttributes(event.attributes) } : event,
    );
    const view = Object.create(span, {
      name: { value: redactValue(span.name), enumerable: true },
      attributes: { value: redactAttributes(span.attributes), enumerable: true },
      events: { value: events, enumerable: true },
      status: {
        value: span.status.message ? { ...span.status, message: redactValue(span.status.message) } : span.status,
        enumerable: true,
      },
    }) as ReadableSpan;
    this.next.onEnd(view);
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

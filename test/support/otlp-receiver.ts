import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One exported span, decoded from OTLP/HTTP JSON, with its resource's service name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean | Array<string | number | boolean>>;
  /** Every string the span carries (name, attribute values, event names and attributes, status message). */
  strings: string[];
}

type AnyValue = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value: AnyValue };

function decodeValue(value: AnyValue): string | number | boolean | Array<string | number | boolean> {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return (value.arrayValue?.values ?? []).map((v) => decodeValue(v) as string | number | boolean);
}

const decodeAttributes = (list: KeyValue[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, decodeValue(value)]));

/**
 * A collector stand-in on loopback: accepts OTLP/HTTP JSON exports at /v1/traces (what
 * `@opentelemetry/exporter-trace-otlp-http` sends) and keeps every span for a test to read.
 */
export class OtlpReceiver {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly spans: ReceivedSpan[],
  ) {}

  static async start(): Promise<OtlpReceiver> {
    const spans: ReceivedSpan[] = [];
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (request.method !== 'POST' || request.url !== '/v1/traces') {
          response.writeHead(404).end();
          return;
        }
        if (!String(request.headers['content-type']).startsWith('application/json')) {
          response.writeHead(415).end();
          return;
        }
        spans.push(...decode(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new OtlpReceiver(server, `http://127.0.0.1:${port}`, spans);
  }

  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

function decode(body: ExportRequest): ReceivedSpan[] {
  const decoded: ReceivedSpan[] = [];
  {
    for (const resourceSpans of body.resourceSpans ?? []) {
      const resource = decodeAttributes(resourceSpans.resource?.attributes);
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          const attributes = decodeAttributes(span.attributes);
          const events = (span.events ?? []).map((e) => ({ name: e.name, attributes: decodeAttributes(e.attributes) }));
          const strings = [
            span.name,
            span.status?.message ?? '',
            ...Object.values(attributes).flat().map(String),
            ...events.flatMap((e) => [e.name, ...Object.values(e.attributes).flat().map(String)]),
          ];
          decoded.push({
            service: String(resource['service.name']),
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId || undefined,
            name: span.name,
            kind: span.kind,
            attributes,
            strings,
          });
        }
      }
    }
  }
  return decoded;
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        events?: Array<{ name: string; attributes?: KeyValue[] }>;
        status?: { message?: string };
      }>;
    }>;
  }>;
}

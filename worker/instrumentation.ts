// The first import of worker/main.ts: tracing (when OTEL_EXPORTER_OTLP_ENDPOINT is set) must patch
// `http` and `pg` before anything else loads them. Also usable as `node --import`.
import { startTracing } from '../lib/tracing';

startTracing('replyonce-worker');

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from '../lib/metrics';

/**
 * The worker has no HTTP API of its own: a minimal server exposes /metrics for Prometheus, and
 * /readyz for health checks: 200 while the worker polls its task queue (`polling` says so), 503 otherwise.
 */
export async function startMetricsServer(
  port: number,
  host: string,
  polling: () => boolean = () => true,
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/readyz') {
      const ready = polling();
      response.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ status: ready ? 'polling' : 'not polling' }));
      return;
    }
    if (request.method !== 'GET' || request.url !== '/metrics') {
      response.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (body) => response.writeHead(200, { 'content-type': registry.contentType }).end(body),
      () => response.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

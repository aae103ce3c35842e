import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { registry } from './metrics';

/** Where Prometheus finds a worker unless METRICS_PORT says otherwise. */
export const DEFAULT_METRICS_PORT = 9464;

export interface MetricsServerOptions {
  port: number;
  host: string;
  /**
   * Take any free port when `port` is in use. True when METRICS_PORT is unset: a second worker on
   * one host (a developer's laptop, two replicas on one VM) must start, and it logs where it listens.
   * False when METRICS_PORT was chosen: a port someone configured a scraper for is not silently moved.
   */
  fallbackToFreePort: boolean;
  /** Whether the worker polls its task queue: /readyz answers 200 while it does, 503 otherwise. */
  polling?: () => boolean;
  /** Why a polling worker still does no work (worker/routing-watch.ts), or null: /readyz answers 503 with it. */
  problem?: () => string | null;
}

export class MetricsPortInUseError extends Error {
  override name = 'MetricsPortInUseError';
}

/**
 * The worker has no HTTP API of its own: a minimal server exposes /metrics for Prometheus, and
 * /readyz for health checks: 200 while the worker polls its task queue and can be given work,
 * 503 otherwise (not polling, or polling in a deployment with no current version: `problem` says why).
 */
export async function startMetricsServer(
  options: MetricsServerOptions,
): Promise<{ url: string; movedFrom?: number; close: () => Promise<void> }> {
  const server = http.createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/readyz') {
      const polling = options.polling?.() ?? true;
      const problem = polling ? (options.problem?.() ?? null) : null;
      response.writeHead(polling && problem === null ? 200 : 503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ status: polling ? 'polling' : 'not polling', ...(problem ? { problem } : {}) }));
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
  let movedFrom: number | undefined;
  try {
    await listen(server, options.port, options.host);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    if (!options.fallbackToFreePort) {
      throw new MetricsPortInUseError(
        `METRICS_PORT=${options.port} on ${options.host} is already in use (another worker on this host?): ` +
          'set METRICS_PORT to a free port, or to 0 for any free one',
      );
    }
    movedFrom = options.port;
    await listen(server, 0, options.host);
  }
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${options.host}:${bound}/metrics`,
    ...(movedFrom !== undefined ? { movedFrom } : {}),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

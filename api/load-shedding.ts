import type { FastifyInstance } from 'fastify';

export interface LoadSheddingOptions {
  maxConcurrentRequests: number;
  /** Paths never shed: probes and scrapes must answer while the replica is busy. */
  exempt: string[];
}

/**
 * On the root instance, so it covers every route. Sheds load before the process falls over: past `maxConcurrentRequests` in flight, a request is
 * answered 503 with Retry-After at once, before its body is read. Svix retries a 503 like any
 * non-2xx, so a burst is spread over the sender's retries (and other replicas) instead of piling
 * up in this process's memory until every answer misses AgentMail's 15 s.
 */
export function installLoadShedding(app: FastifyInstance, options: LoadSheddingOptions): void {
  let inFlight = 0;
  const exempt = new Set(options.exempt);
  app.addHook('onRequest', async (request, reply) => {
    if (exempt.has(request.url.split('?')[0] ?? '')) return;
    if (inFlight >= options.maxConcurrentRequests) {
      request.log.warn({ inFlight, limit: options.maxConcurrentRequests }, 'request shed: too many in flight');
      return reply
        .code(503)
        .header('retry-after', '1')
        .send({ error: 'overloaded', message: 'Too many requests in flight; retry shortly.' });
    }
    inFlight += 1;
    // 'close' fires once the answer is sent or the socket is gone, whatever happened in between.
    reply.raw.once('close', () => (inFlight -= 1));
  });
}

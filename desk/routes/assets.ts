import type { FastifyInstance } from 'fastify';
import { STYLESHEET } from '../views';

/** The health check and the one stylesheet (the CSP allows nothing else). */
export async function assetRoutes(app: FastifyInstance): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/desk.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(STYLESHEET),
  );
}

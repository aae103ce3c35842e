import type { FastifyReply, FastifyRequest } from 'fastify';
import { csrfBinding } from './plugins/security';
import type { Frame } from './views';

/** What every page's frame needs: the signed-in reviewer and a CSRF token bound to their session. */
export const frame = (request: FastifyRequest, reply: FastifyReply): Frame => ({
  reviewer: request.reviewer,
  // `secure` for a new secret cookie: also when a trusted proxy says the browser came over https.
  csrf: reply.generateCsrf({
    userInfo: csrfBinding(request),
    secure: request.server.deskCookies.options(request).secure,
  }),
});

/** A page: HTML, never cached (it shows who is signed in and what waits). */
export const htmlReply = (reply: FastifyReply, code: number, body: string) =>
  reply.code(code).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(body);

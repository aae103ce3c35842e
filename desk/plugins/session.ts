import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Db } from '../../lib/db';
import { problemPage } from '../views';
import { frame, htmlReply } from '../respond';
import { DeskSessions, type SignedIn } from '../sessions';

/**
 * Who is signed in: every request but the public ones finds its reviewer from the session cookie
 * (desk/sessions.ts, in Postgres), or is sent to the sign-in page. Decorates `request.reviewer`
 * and the app's `sessions`.
 */

declare module 'fastify' {
  interface FastifyInstance {
    sessions: DeskSessions;
  }
  interface FastifyRequest {
    reviewer: SignedIn | null;
  }
}

export interface SessionOptions {
  db: Db;
  /** How long a sign-in lasts. */
  ttlMs: number;
}

/** Served to anyone: the sign-in form, the stylesheet, the health check. */
const PUBLIC = new Set(['/sign-in', '/desk.css', '/healthz']);

async function session(app: FastifyInstance, options: SessionOptions): Promise<void> {
  app.decorate('sessions', new DeskSessions(options.db, options.ttlMs));
  app.decorateRequest('reviewer', null);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    if (PUBLIC.has(path)) return;
    const id = request.cookies[app.deskCookies.session];
    const reviewer = id ? await app.sessions.find(id) : null;
    if (reviewer === null || id === undefined) {
      if (id !== undefined) void reply.clearCookie(app.deskCookies.session, app.deskCookies.options(request));
      if (request.method === 'GET') return reply.code(303).redirect('/sign-in');
      return htmlReply(reply, 401, problemPage(frame(request, reply), 'Signed out', 'Sign in again to continue.'));
    }
    request.reviewer = reviewer;
    request.sessionId = id;
  });
}

export const sessionPlugin = fp(session, { name: 'desk-session', dependencies: ['desk-security'] });

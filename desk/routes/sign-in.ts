import type { FastifyInstance } from 'fastify';
import type { Db } from '../../lib/db';
import { authenticateReviewer } from '../../review/reviewers';
import { signInForm, signOutForm } from '../forms';
import { frame, htmlReply } from '../respond';
import { signInPage } from '../views';

export interface SignInOptions {
  db: Db;
  /** Sign-in attempts per client address per minute (DESK_SIGNIN_ATTEMPTS_PER_MINUTE). */
  attemptsPerMinute: number;
}

/** Signing in with a reviewer's token, and out. */
export async function signInRoutes(app: FastifyInstance, options: SignInOptions): Promise<void> {
  app.get('/sign-in', async (request, reply) => htmlReply(reply, 200, signInPage(frame(request, reply), null)));

  app.post<{ Body: { token: string } }>(
    '/sign-in',
    {
      schema: { body: signInForm },
      preHandler: app.csrfCheck,
      config: { rateLimit: { max: options.attemptsPerMinute, timeWindow: 60_000 } },
    },
    async (request, reply) => {
      const token = request.body.token;
      const reviewer = token ? await authenticateReviewer(options.db, token) : null;
      if (reviewer === null) {
        request.log.warn('desk sign-in refused: unknown or revoked token');
        return htmlReply(
          reply,
          401,
          signInPage(
            frame(request, reply),
            'That token is not valid, or it has been revoked. Ask an operator for a new one.',
          ),
        );
      }
      const session = await app.sessions.create(reviewer.id);
      request.log.info({ reviewer: reviewer.id }, 'desk sign-in');
      return reply
        .setCookie(app.deskCookies.session, session.id, {
          ...app.deskCookies.options(request),
          expires: session.expiresAt,
        })
        .code(303)
        .redirect('/');
    },
  );

  app.post('/sign-out', { schema: { body: signOutForm }, preHandler: app.csrfCheck }, async (request, reply) => {
    if (request.sessionId) await app.sessions.end(request.sessionId);
    return reply.clearCookie(app.deskCookies.session, app.deskCookies.options(request)).code(303).redirect('/sign-in');
  });
}

import { createHash } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import fastifyHelmet from '@fastify/helmet';
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/**
 * The desk's transport and form security, for every route: HTTPS-only outside loopback, the
 * Content-Security-Policy, cookies, form bodies, CSRF tokens bound to the sign-in, the rate limit.
 *
 * CSRF: a form's token is valid only with the CSRF secret cookie *and* the session it was made
 * for (the token binds the session id, which lives in an HttpOnly cookie no other site can read).
 * A cookie planted by a sibling subdomain, or by a neighbour on plain http, is then useless: it
 * cannot mint a token for the victim's session. Behind TLS both cookies carry the `__Host-`
 * prefix (Secure, Path=/, no Domain), which a sibling subdomain cannot set at all.
 */

export interface SecurityOptions {
  /** DESK_PUBLIC_URL starts with https: HSTS, Secure and `__Host-` cookies. */
  httpsOnly: boolean;
}

export interface CookieNames {
  session: string;
  csrf: string;
}

/** The cookies' names: `__Host-` behind TLS (browsers refuse them over http, so not on loopback http). */
export const cookieNames = (httpsOnly: boolean): CookieNames =>
  httpsOnly
    ? { session: '__Host-desk_session', csrf: '__Host-desk_csrf' }
    : { session: 'desk_session', csrf: 'desk_csrf' };

declare module 'fastify' {
  interface FastifyInstance {
    /** The CSRF check, as a preHandler of every route that changes anything. */
    csrfCheck: (request: FastifyRequest, reply: FastifyReply, done: () => void) => void;
    deskCookies: CookieNames & { options: (request: FastifyRequest) => CookieOptions };
  }
  interface FastifyRequest {
    /** The session id from the cookie, once the session plugin has found it valid. */
    sessionId: string | null;
  }
}

interface CookieOptions {
  path: '/';
  httpOnly: true;
  sameSite: 'strict';
  secure: boolean;
}

/**
 * What a CSRF token is bound to: the session (a hash of its id: the id itself never leaves the
 * cookie), or a fixed word before sign-in (the sign-in form; the library refuses an empty binding).
 */
export const csrfBinding = (request: FastifyRequest): string =>
  request.sessionId ? createHash('sha256').update(request.sessionId, 'utf8').digest('base64url') : 'signed-out';

const LOOPBACK = /^(localhost|[^.]+\.localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/** Whether the browser reached the desk by a loopback name (`Host`), where plain http is safe enough. */
export function reachedOnLoopback(request: FastifyRequest): boolean {
  const host = (request.headers.host ?? '').replace(/:\d+$/, '');
  return LOOPBACK.test(host);
}

async function security(app: FastifyInstance, options: SecurityOptions): Promise<void> {
  const names = cookieNames(options.httpsOnly);
  const secure = (request: FastifyRequest) => options.httpsOnly || request.protocol === 'https';
  app.decorate('deskCookies', {
    ...names,
    options: (request: FastifyRequest): CookieOptions => ({
      path: '/',
      httpOnly: true,
      sameSite: 'strict',
      secure: secure(request),
    }),
  });
  app.decorateRequest('sessionId', null);

  // Plain http only where nobody else is on the wire: a browser on this machine (or a published
  // loopback port, as docker compose does). Anywhere else the desk answers nothing but this.
  app.addHook('onRequest', async (request, reply) => {
    if (request.protocol === 'https' || reachedOnLoopback(request) || request.url === '/healthz') return;
    request.log.warn({ host: request.headers.host }, 'desk refused a plain-http request to a non-loopback address');
    return reply
      .code(403)
      .type('text/plain; charset=utf-8')
      .send(
        'The review desk is served over https only (plain http on loopback addresses alone). Put it behind a TLS proxy: DESK_PUBLIC_URL=https://…, DESK_TRUST_PROXY=true.\n',
      );
  });

  await app.register(fastifyHelmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
        objectSrc: ["'none'"],
      },
    },
    // Only over TLS does HSTS mean anything; on loopback http it would only confuse a browser later.
    strictTransportSecurity: options.httpsOnly,
  });
  await app.register(fastifyCookie);
  await app.register(fastifyFormbody);
  await app.register(fastifyCsrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: names.csrf,
    cookieOpts: { path: '/', httpOnly: true, sameSite: 'strict', secure: options.httpsOnly },
    getUserInfo: csrfBinding,
    // The binding's secrecy is the session id's, not this key's: it only keys the token's HMAC.
    csrfOpts: { hmacKey: 'replyonce review desk: csrf token bound to the session' },
  });
  await app.register(fastifyRateLimit, { global: false });
  // The plugin's hook, as a function of its own (it reads `this` only as the instance).
  app.decorate('csrfCheck', (request: FastifyRequest, reply: FastifyReply, done: () => void) =>
    app.csrfProtection(request, reply, done),
  );
}

export const securityPlugin = fp(security, { name: 'desk-security' });

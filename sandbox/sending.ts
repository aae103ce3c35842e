import type { FastifyReply, FastifyRequest } from 'fastify';
import { decodedPath } from './faults';
import { parseIdempotencyKey, requestFingerprint } from './idempotency';
import type { SandboxState } from './state';
import type { SendMessageResponseRaw } from './wire';

/** What a send endpoint does once it may send: store the message, record it in the outbox. */
export type Perform = (idempotencyKey: string | null, endpoint: string) => SendMessageResponseRaw;

/**
 * The Idempotency-Key contract shared by reply, send and drafts.send:
 * no key → send every time; first key → claim, send, store the response; same key and request
 * → the stored response, nothing sent; same key while the first is in flight, or with another
 * request → 409. The delay fault sits inside the claim, where the in-flight window is.
 */
export async function idempotentSend(
  state: SandboxState,
  request: FastifyRequest,
  reply: FastifyReply,
  perform: Perform,
): Promise<SendMessageResponseRaw> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  const endpoint = `${request.method} ${decodedPath(request.url)}`;
  if (key === null) {
    await state.faults.delay(request.raw);
    return perform(null, endpoint);
  }
  const claim = state.idempotency.claim(key, endpoint, requestFingerprint(endpoint, request.body));
  if (claim.kind === 'replay') {
    // Informational only: AgentMail documents no such header, so callers must not rely on it.
    void reply.header('x-sandbox-idempotent-replay', 'true');
    return claim.response.body as SendMessageResponseRaw;
  }
  try {
    await state.faults.delay(request.raw);
    const body = perform(key, endpoint);
    state.idempotency.complete(key, { status: 200, body });
    return body;
  } catch (error) {
    state.idempotency.release(key);
    throw error;
  }
}

/** `"Ada" <ada@example.com>` → `ada@example.com`, for comparing addresses. */
export function bareAddress(mailbox: string): string {
  return (/<([^<>]+)>\s*$/.exec(mailbox)?.[1] ?? mailbox).trim().toLowerCase();
}

export function replySubject(subject: string | undefined): string {
  const s = subject ?? '';
  return /^re:/i.test(s) ? s : `Re: ${s}`;
}

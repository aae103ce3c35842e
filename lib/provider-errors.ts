import { AgentMailError, AgentMailTimeoutError } from 'agentmail';

/**
 * What may be said about a provider's error outside the process that got it. The AgentMail SDK
 * puts the whole response body into `error.message` ("…\nBody: {…}"), and a body can quote what
 * we sent: the reply's text, the recipients, the subject. Temporal failures (history, the Web UI),
 * logs and HTTP answers get this description instead — the status, the error's name and a short
 * detail made of identifiers only (the body's `name` and `code`, a network error's code) — never
 * a body, a message text or `error.message`.
 */
export interface ProviderErrorDescription {
  /** The HTTP status, when the provider answered. */
  status: number | undefined;
  /** The SDK's error class (`UnprocessableEntityError`, `AgentMailTimeoutError`) or the error's name. */
  name: string;
  /** Identifiers only: the body's `name`/`code`, or a network error's code (`ECONNRESET`). */
  detail: string | undefined;
}

/** An identifier is safe to repeat: short, no spaces, no `@`, nothing a customer wrote. */
const IDENTIFIER = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
const identifier = (value: unknown): string | undefined =>
  typeof value === 'string' && IDENTIFIER.test(value) ? value : undefined;

export function describeProviderError(error: unknown): ProviderErrorDescription {
  if (error instanceof AgentMailError) {
    const body = (typeof error.body === 'object' && error.body !== null ? error.body : {}) as Record<string, unknown>;
    const details = [identifier(body.name), identifier(body.code)].filter(
      (d) => d !== undefined && d !== error.name && d !== 'Error',
    );
    return {
      status: error.statusCode,
      name: identifier(error.name) ?? 'AgentMailError',
      detail: details.length > 0 ? details.join(', ') : undefined,
    };
  }
  if (error instanceof AgentMailTimeoutError)
    return { status: undefined, name: 'AgentMailTimeoutError', detail: undefined };
  if (error instanceof Error) {
    const cause = error.cause as { code?: unknown } | undefined;
    const code = identifier((error as { code?: unknown }).code) ?? identifier(cause?.code);
    return { status: undefined, name: identifier(error.name) ?? 'Error', detail: code };
  }
  return { status: undefined, name: typeof error, detail: undefined };
}

/** `AgentMail answered 422 UnprocessableEntityError (ValidationError)`, `AgentMailTimeoutError`, `TypeError (ECONNRESET)`. */
export function providerErrorText(error: unknown): string {
  const { status, name, detail } = describeProviderError(error);
  const what = status === undefined ? name : `AgentMail answered ${status} ${name}`;
  return detail === undefined ? what : `${what} (${detail})`;
}

/** True for what the AgentMail SDK throws: its status errors and its timeout. */
export const isAgentMailError = (error: unknown): error is AgentMailError | AgentMailTimeoutError =>
  error instanceof AgentMailError || error instanceof AgentMailTimeoutError;

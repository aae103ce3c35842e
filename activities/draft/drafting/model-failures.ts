import { ApplicationFailure } from '@temporalio/common';
import { APICallError } from 'ai';
import { FailureType } from '../../../contract';
import { retryAfterMs } from '../../failures/retry-after';

/**
 * What a failed model call means for the message, as a Temporal failure a person can search for.
 * Temporal's activity retry is the one retry layer (the AI SDK's own retries are off), so every
 * attempt shows in the Web UI: passing trouble (timeouts, 429, 5xx, a dropped connection, a bad
 * key that an operator can fix) is retried with backoff, honouring a 429's Retry-After; an answer
 * that retrying would not change (a refusal, a rejected request, invalid output) is final and the
 * workflow ends `ReplyStatus=failed` for a person to answer.
 *
 * Nothing a provider returns goes into a failure (issue 18 point 9): the AI SDK's error messages
 * embed the response body (for a 200 of the wrong shape, the drafted text itself), and a failure's
 * message lands in Temporal history, the worker's log and the activity's span. A failure says the
 * type, the HTTP status, the SDK error's class and a fixed description; never the SDK's message,
 * never the SDK error as a cause.
 */

export const DraftFailureType = {
  Timeout: 'DraftTimeout',
  RateLimited: 'DraftRateLimited',
  ProviderUnavailable: 'DraftProviderUnavailable',
  ProviderUnauthorized: 'DraftProviderUnauthorized',
  ModelNotFound: 'DraftModelNotFound',
  MalformedResponse: 'DraftMalformedResponse',
  Refused: FailureType.DraftRefused,
  RequestRejected: FailureType.DraftRequestRejected,
  Invalid: FailureType.InvalidDraft,
} as const;

const retryable = (type: string, message: string, nextRetryDelay?: number) =>
  ApplicationFailure.create({
    type,
    message,
    nonRetryable: false,
    ...(nextRetryDelay !== undefined ? { nextRetryDelay } : {}),
  });
const final = (type: string, message: string) => ApplicationFailure.create({ type, message, nonRetryable: true });

export interface CallContext {
  /** `<provider>:<model>`, for messages. */
  drafter: string;
  timeoutMs: number;
  /** Our own deadline fired (DRAFT_TIMEOUT_MS), as opposed to the activity being cancelled. */
  timedOut: boolean;
}

export function modelCallFailure(error: unknown, context: CallContext): unknown {
  const { drafter } = context;
  if (context.timedOut) {
    return retryable(
      DraftFailureType.Timeout,
      `the ${drafter} model did not answer within DRAFT_TIMEOUT_MS=${context.timeoutMs} ms`,
    );
  }
  if (!APICallError.isInstance(error)) {
    // An aborted call (the activity was cancelled) is not ours to classify; anything else the
    // SDK throws after a 2xx is a response it could not read (a proxy's error page, a cut body).
    if (error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError')) return error;
    return retryable(
      DraftFailureType.MalformedResponse,
      `the ${drafter} model's answer could not be read (${errorClass(error)}); its content is not recorded`,
    );
  }
  const status = error.statusCode;
  const wait = retryAfterMs(error.responseHeaders);
  if (status === undefined) {
    return retryable(DraftFailureType.ProviderUnavailable, `cannot reach the ${drafter} model${connectionCode(error)}`);
  }
  if (status >= 200 && status < 300) {
    // A 2xx the SDK could not read (invalid JSON, the wrong shape): its message quotes the body.
    return retryable(
      DraftFailureType.MalformedResponse,
      `the ${drafter} model answered ${status} with a body that could not be read (${errorClass(error.cause ?? error)}); its content is not recorded`,
    );
  }
  if (status === 429) {
    return retryable(
      DraftFailureType.RateLimited,
      `the ${drafter} model is rate-limiting us (429)${wait !== undefined ? `; retrying after ${wait} ms as it asked` : ''}`,
      wait,
    );
  }
  if (status >= 500 || status === 408 || status === 409) {
    return retryable(
      DraftFailureType.ProviderUnavailable,
      `the ${drafter} model answered ${status}; its body is not recorded`,
      wait,
    );
  }
  if (status === 401 || status === 403) {
    return retryable(
      DraftFailureType.ProviderUnauthorized,
      `the ${drafter} model rejected our credentials (${status}): check DRAFT_API_KEY`,
    );
  }
  if (status === 404) {
    return retryable(
      DraftFailureType.ModelNotFound,
      `the ${drafter} model was not found (404): check DRAFT_MODEL and DRAFT_BASE_URL`,
    );
  }
  return final(
    DraftFailureType.RequestRejected,
    `the ${drafter} model rejected the request (${status}); its body is not recorded`,
  );
}

/** The model answered, but declined (a refusal, a content filter): a person must answer this one. */
export function refusal(drafter: string, rawFinishReason: string | undefined): ApplicationFailure {
  return final(
    DraftFailureType.Refused,
    `the ${drafter} model declined to draft a reply (a refusal or a content filter; its finish reason: ${finishReason(rawFinishReason)}); a person must answer this message`,
  );
}

/** The model stopped at DRAFT_MAX_OUTPUT_TOKENS: a cut-off reply is not sent. */
export function truncated(drafter: string, maxOutputTokens: number): ApplicationFailure {
  return final(
    DraftFailureType.Invalid,
    `the ${drafter} model's reply was cut off at DRAFT_MAX_OUTPUT_TOKENS=${maxOutputTokens}`,
  );
}

/** The SDK error's class (AI_JSONParseError, AI_TypeValidationError…): a fixed name, never its message. */
function errorClass(error: unknown): string {
  const name = error instanceof Error ? error.name : typeof error;
  return /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(name) ? name : 'an unnamed error';
}

/** A connection failure's system code (ECONNREFUSED, ETIMEDOUT…), when the SDK kept one. */
function connectionCode(error: APICallError): string {
  let cause: unknown = error.cause;
  for (let depth = 0; depth < 3 && cause instanceof Error; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,31}$/.test(code)) return ` (${code})`;
    cause = cause.cause;
  }
  return '';
}

/** A provider's finish reason is its text too: shown only when it is a plain token (`refusal`, `content_filter`). */
function finishReason(raw: string | undefined): string {
  return raw !== undefined && /^[a-z_-]{1,32}$/i.test(raw) ? raw : 'unknown';
}

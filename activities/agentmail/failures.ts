import { ApplicationFailure } from '@temporalio/activity';
import { AgentMailError } from 'agentmail';
import { describeProviderError, providerErrorText } from '../../lib/provider-errors';
import { FailureType, RetryableFailureType } from '../../contract';
import { retryAfterMs } from '../failures/retry-after';

/**
 * AgentMail's errors as Temporal failures: the one place that turns them into something history,
 * the Web UI and the logs may carry (lib/provider-errors.ts: status, name, identifiers — never the
 * body the SDK copies into `error.message`, and never the SDK error itself as a `cause`).
 *
 * | AgentMail | failure | retried |
 * |---|---|---|
 * | 401 | `AgentMailUnauthorized` | yes: an operator fixes AGENTMAIL_API_KEY |
 * | 408, 429, 5xx, a timeout, a reset | `AgentMailUnavailable` | yes |
 * | any other 4xx (400, 403, 413, 422, …) | `AgentMailRejected` | no: the same request gets the same answer |
 *
 * Callers that give a status its own meaning (404 on a read, 409 on a send) decide before calling this.
 */
export function providerFailure(error: unknown, doing: string): ApplicationFailure {
  if (error instanceof ApplicationFailure) return error;
  const { status } = describeProviderError(error);
  const message = `${doing}: ${providerErrorText(error)}`;
  if (status === 401)
    return ApplicationFailure.create({
      type: RetryableFailureType.AgentMailUnauthorized,
      message: `${message}; check AGENTMAIL_API_KEY`,
      nonRetryable: false,
    });
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429)
    return ApplicationFailure.create({ type: FailureType.AgentMailRejected, message, nonRetryable: true });
  // A 429 or 503 may say how long to wait (Retry-After); Temporal's backoff decides otherwise.
  const wait = error instanceof AgentMailError ? retryAfterMs(error.rawResponse?.headers) : undefined;
  return ApplicationFailure.create({
    type: RetryableFailureType.AgentMailUnavailable,
    message,
    nonRetryable: false,
    ...(wait !== undefined ? { nextRetryDelay: wait } : {}),
  });
}

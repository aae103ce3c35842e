/**
 * Every failure type the system raises, in one place: the final ones (the workflow's retry
 * policy never retries them, and a person can search for them in the Web UI) and the retryable
 * ones (an answer that may pass; the activity is retried with the same operation key).
 */

/** Final: a bug or a permanent refusal. The workflow's non-retryable list. */
export const FailureType = {
  OperationConflict: 'OperationConflict',
  ReplyConflict: 'ReplyConflict',
  ReplyRejected: 'ReplyRejected',
  MessageNotFound: 'MessageNotFound',
  DraftMissing: 'DraftMissing',
  InvalidDraft: 'InvalidDraft',
  /** The model declined to write a reply (a refusal or a content filter): a person answers. */
  DraftRefused: 'DraftRefused',
  /** The model's provider rejected the request itself (400/413/422, e.g. the thread exceeds its context). */
  DraftRequestRejected: 'DraftRequestRejected',
  /** The model's answer ignored the structured-output schema (not JSON, or not `{ reply, citations, handoff }`): nothing is sent. */
  DraftSchemaViolation: 'DraftSchemaViolation',
  /** The help desk refused the ticket's idempotency key: the key was used with a different request. */
  TicketConflict: 'TicketConflict',
  /** The help desk rejected the ticket as invalid (422 and other 4xx that retrying cannot fix). */
  TicketRejected: 'TicketRejected',
  InvalidReview: 'InvalidReview',
  /**
   * A verdict refused by the workflow: none is awaited (the message is still deciding or drafting,
   * its inbox needs no approval, or it is done), it names a stale revision, or another verdict
   * stands. The message names the current ReplyStatus or the verdict that stands.
   */
  ReviewRefused: 'ReviewRefused',
  /** A reply was about to go out without a single valid recipient (activities/decide/recipients.ts): a bug, never guessed. */
  NoValidRecipient: 'NoValidRecipient',
  /** An effect activity was called without its operation key (a task scheduled by an older workflow version). */
  OperationKeyMissing: 'OperationKeyMissing',
  /** Postgres refused a statement for good: a constraint or data error (SQLSTATE 22xxx, 23xxx). */
  DatabaseRejected: 'DatabaseRejected',
  /** AgentMail refused a request that retrying cannot fix (a 4xx other than 404, 408, 409, 429). */
  AgentMailRejected: 'AgentMailRejected',
  /**
   * The message was erased on the customer's request (privacy/erase.ts): its operations are
   * tombstones, so nothing of it is drafted, sent, ticketed or notified again. The workflow ends
   * ReplyStatus=erased.
   */
  Erased: 'Erased',
  /** The review notification webhook refused the post (a 4xx other than 408/429): its URL or its workspace is wrong. */
  NotifyRejected: 'NotifyRejected',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Retryable: the same request may succeed later, under the same operation key. */
export const RetryableFailureType = {
  /** Another attempt holds the reply's claim (its lease is live): try again once it has finished. */
  ReplyInProgress: 'ReplyInProgress',
  /** AgentMail answered 408, 429, 5xx, or not at all. */
  AgentMailUnavailable: 'AgentMailUnavailable',
  /** AgentMail refused our API key (401): an operator fixes AGENTMAIL_API_KEY and the retry succeeds. */
  AgentMailUnauthorized: 'AgentMailUnauthorized',
  /** The organisation's inbox list could not be read, so no message can be judged "from us or not". */
  OwnInboxesUnavailable: 'OwnInboxesUnavailable',
  /** A send's outcome is not known yet (a lost response): retried with the same Idempotency-Key. */
  ReplyOutcomeUnknown: 'ReplyOutcomeUnknown',
  /** A ticket's creation outcome is not known yet: retried with the same help-desk key. */
  TicketOutcomeUnknown: 'TicketOutcomeUnknown',
  /** The review notification webhook answered 408, 429, 5xx, or not at all. */
  NotifyUnavailable: 'NotifyUnavailable',
} as const;
export type RetryableFailureType = (typeof RetryableFailureType)[keyof typeof RetryableFailureType];

/**
 * Local activities retry inside their workflow task while the backoff is shorter than this; a
 * longer one becomes a durable timer, and the task completes. Every workflow's local activities use
 * it, so a failure asking for a longer delay always lets its task complete.
 */
export const LOCAL_RETRY_THRESHOLD_MS = 10_000;

/**
 * The operation store's outcomes that are not "you own it, go ahead". Each carries a stable
 * `name` so the activity layer can map it to a Temporal failure type a person can search for.
 */
export class OperationStoreError extends Error {
  constructor(
    message: string,
    readonly operationKey: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The key exists with a different request: a programming error. Never guess, never retry. */
export class OperationConflictError extends OperationStoreError {
  override name = 'OperationConflict';
}

/** Another attempt holds a live lease on the key: retry later. */
export class OperationInProgressError extends OperationStoreError {
  override name = 'OperationInProgress';
  constructor(
    operationKey: string,
    readonly leaseUntil: Date | null,
  ) {
    super(
      `operation ${operationKey} is in progress in another attempt (lease until ${leaseUntil?.toISOString() ?? 'unknown'})`,
      operationKey,
    );
  }
}

/** This attempt lost its lease (it was too slow and a newer attempt took over): its result is discarded. */
export class LeaseLostError extends OperationStoreError {
  override name = 'LeaseLost';
}

/** The effect failed terminally before; the failure is replayed. A new attempt needs a new key version. */
export class OperationFailedError extends OperationStoreError {
  override name = 'OperationFailed';
  constructor(
    operationKey: string,
    readonly failure: StoredFailure,
  ) {
    super(`operation ${operationKey} failed earlier: ${failure.type}: ${failure.message}`, operationKey);
  }
}

export interface StoredFailure {
  type: string;
  message: string;
}

/**
 * The operation belongs to an erased message (privacy/erase.ts): its row is a tombstone, or its
 * key lies under an erased message's prefix. Nothing of it runs again and nothing is replayed but
 * the fact; the activity ends with the final failure `Erased` (contract/failures.ts).
 */
export class OperationErasedError extends OperationStoreError {
  override name = 'Erased';
  constructor(operationKey: string) {
    super(`operation ${operationKey} belongs to an erased message: nothing of it runs or is replayed`, operationKey);
  }
}

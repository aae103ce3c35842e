import { ApplicationFailure, Context } from '@temporalio/activity';
import { LOCAL_RETRY_THRESHOLD_MS, RetryableFailureType } from '../../contract';

/**
 * A turn activity that ends when its attempt does, or when its worker stops, even while Temporal
 * is still to answer. These activities call Temporal (signals to the runs they answer, a look at
 * a holder's run), and the worker's client cannot abort a call it has sent: so the activity's result
 * races the attempt's cancellation (its timeout, its workflow's cancellation) and the worker's stop.
 * The stop matters because Temporal waits for a local activity when its worker shuts down, and never
 * cancels it: a call stuck on an unreachable server would hold the whole shutdown open.
 *
 * Stopped, the attempt fails as WorkerStopping with a retry delay just past the local-retry
 * threshold, so the message's workflow task completes at once with a timer, and the next worker
 * takes the step up after it (an ask or a release repeated changes nothing: the thread's row answers
 * a known run alike). The call left behind ends by the attempt's deadline at the latest.
 */
export function abortable<A extends unknown[], R>(
  activity: (...args: A) => Promise<R>,
  workerStopping: AbortSignal,
): (...args: A) => Promise<R> {
  return async (...args: A) => {
    const { client, cancellationSignal, info } = Context.current();
    const call = client.withDeadline(Date.now() + info.startToCloseTimeoutMs, () => activity(...args));
    let stop: (() => void) | undefined;
    const stopped = new Promise<never>((_resolve, reject) => {
      stop = () => reject(workerStopping.aborted ? workerStopped() : asError(cancellationSignal.reason));
      if (workerStopping.aborted || cancellationSignal.aborted) stop();
    });
    workerStopping.addEventListener('abort', stop!, { once: true });
    cancellationSignal.addEventListener('abort', stop!, { once: true });
    call.catch(() => undefined); // a call outlived by its attempt settles unobserved
    try {
      return await Promise.race([call, stopped]);
    } finally {
      workerStopping.removeEventListener('abort', stop!);
      cancellationSignal.removeEventListener('abort', stop!);
    }
  };
}

function workerStopped(): ApplicationFailure {
  return ApplicationFailure.create({
    message: 'the worker stopped while this step waited on Temporal; the next worker takes it up',
    type: RetryableFailureType.WorkerStopping,
    nextRetryDelay: LOCAL_RETRY_THRESHOLD_MS + 1_000,
  });
}

/** The attempt's own cancellation reason (a CancelledFailure from the SDK), as an Error to throw. */
function asError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}

import { ApplicationFailure } from '@temporalio/activity';
import { isAgentMailError } from '../../lib/provider-errors';
import { databaseRejection } from './database';
import { providerFailure } from '../agentmail/failures';
import { OperationErasedError } from '../operation-store/errors';
import { erasedFailure } from '../operation-store/run-operation';

/**
 * What an activity's failure may carry out of the worker, applied once to every activity
 * (activities/index.ts): Temporal stores a thrown error's message and stack in history, shows
 * them in the Web UI and the worker logs them. So
 *  - Postgres's constraint and data errors become the final `DatabaseRejected` (database-errors.ts);
 *  - an AgentMail error no activity classified becomes its sanitized failure (provider-errors.ts).
 * Our own ApplicationFailures and errors pass as they are: their messages are written to be safe.
 */
export function failureLeavingActivity(error: unknown, activity: string): unknown {
  if (error instanceof ApplicationFailure) return error;
  // A stored result read outside runOperation (a draft, a review) of an erased message: final.
  if (error instanceof OperationErasedError) return erasedFailure(error.operationKey);
  const rejected = databaseRejection(error);
  if (rejected) return rejected;
  if (isAgentMailError(error)) return providerFailure(error, activity);
  return error;
}

type AsyncFunctions = Record<string, (...args: never[]) => Promise<unknown>>;

/** Every activity of the worker behind failureLeavingActivity. */
export function withFailureBoundary<T extends AsyncFunctions>(activities: T): T {
  return Object.fromEntries(
    Object.entries(activities).map(([name, activity]) => [
      name,
      (...args: never[]) =>
        activity(...args).catch((error: unknown) => {
          throw failureLeavingActivity(error, name);
        }),
    ]),
  ) as T;
}

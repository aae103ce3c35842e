import {
  ActivityFailure,
  ApplicationFailure,
  continueAsNew,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { RehearsalActivities } from '../activities/rehearsal';
import {
  REHEARSAL_OUTCOMES,
  RehearsalFailureType,
  type RehearsalInput,
  type RehearsalOutcomeKind,
  type RehearsalProgress,
  rehearsalProgressQuery,
  type RehearsedMessage,
} from '../contract/rehearsal';

/**
 * A rehearsal (docs/rehearsal.md): an inbox's past mail, each message run through the decision,
 * the turn rules, retrieval, the drafter and the draft rules by an activity that can reach no
 * outward effect (activities/rehearsal/). Its id is the rehearsal's, so starting it twice is one
 * rehearsal; a worker that dies mid-run leaves it to the next, and a message already rehearsed is
 * replayed from Postgres, never drafted again. Only positions, outcome names and counts pass
 * through here: the texts stay in Postgres.
 */

/** Listing a period may meet AgentMail away: the rehearsal waits (retries) up to a day before it fails. */
const { listRehearsal } = proxyActivities<RehearsalActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  scheduleToCloseTimeout: '1 day',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '1 minute',
    nonRetryableErrorTypes: Object.values(RehearsalFailureType),
  },
});

const { finishRehearsal, pruneRehearsals, recordUnreadable } = proxyActivities<RehearsalActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** Default wait for AgentMail (a message that cannot be read past it is reported unreadable, the rest go on). */
const READ_WAIT_MS = 30 * 60 * 1000;
/** A run continues as new past this many events (about three per message), carrying its counts. */
const EVENTS_PER_RUN = 6_000;

export async function rehearsalWorkflow(input: RehearsalInput): Promise<RehearsalProgress> {
  const concurrency = Math.max(1, Math.min(input.concurrency ?? 4, 32));
  const counts: Partial<Record<RehearsalOutcomeKind, number>> = { ...(input.counts ?? {}) };
  const progress = (): RehearsalProgress => ({
    rehearsalId: input.rehearsalId,
    phase: total === undefined ? 'listing' : done() < total ? 'rehearsing' : 'done',
    total: total ?? 0,
    done: done(),
    counts,
  });
  const done = () => REHEARSAL_OUTCOMES.reduce((sum, kind) => sum + (counts[kind] ?? 0), 0);
  let total = input.total;
  setHandler(rehearsalProgressQuery, progress);

  const rehearse = proxyActivities<RehearsalActivities>({
    startToCloseTimeout: '5 minutes',
    // A worker killed mid-draft is noticed within this, and the next attempt takes the claim over.
    heartbeatTimeout: '10 seconds',
    scheduleToCloseTimeout: input.readWaitMs ?? READ_WAIT_MS,
    retry: {
      initialInterval: '1 second',
      maximumInterval: '1 minute',
      nonRetryableErrorTypes: Object.values(RehearsalFailureType),
    },
  }).rehearseMessage;

  if (total === undefined) {
    await pruneRehearsals();
    total = (await listRehearsal({ rehearsalId: input.rehearsalId })).total;
  }
  const count = total;

  const one = async (position: number): Promise<void> => {
    let result: RehearsedMessage;
    try {
      result = await rehearse({ rehearsalId: input.rehearsalId, position });
    } catch (error) {
      const failure = failureTypeOf(error);
      if (failure !== null && (Object.values(RehearsalFailureType) as string[]).includes(failure)) throw error;
      // AgentMail would not give us this message within the wait (or another step kept failing):
      // recorded with its failure's type, and the rest go on.
      result = await recordUnreadable({ rehearsalId: input.rehearsalId, position, failure: failure ?? 'unknown' });
    }
    counts[result.outcome] = (counts[result.outcome] ?? 0) + 1;
    setCurrentDetails(`**Rehearsed** ${done()} of ${count} messages`);
  };

  let next = input.next ?? 0;
  const running = new Set<Promise<void>>();
  const longHistory = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > EVENTS_PER_RUN;
  while (next < count || running.size > 0) {
    while (running.size < concurrency && next < count && !longHistory()) {
      const task: Promise<void> = one(next++).finally(() => running.delete(task));
      running.add(task);
    }
    if (running.size === 0) break;
    await Promise.race(running);
  }
  if (next < count) {
    return continueAsNew<typeof rehearsalWorkflow>({ ...input, total: count, next, counts });
  }
  await finishRehearsal({ rehearsalId: input.rehearsalId });
  return progress();
}

/** The failure type of an activity's failure (ApplicationFailure.type), or null. */
function failureTypeOf(error: unknown): string | null {
  // A timeout (the wait for AgentMail ran out) carries the last attempt's failure as its cause.
  let cause: unknown = error instanceof ActivityFailure ? error.cause : error;
  for (let depth = 0; depth < 3 && cause instanceof Error; depth++) {
    if (cause instanceof ApplicationFailure) return cause.type ?? null;
    if (!(cause.cause instanceof Error)) return cause.name;
    cause = cause.cause;
  }
  return null;
}

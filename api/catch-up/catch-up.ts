import type { Client } from '@temporalio/client';
import type { AgentMail, AgentMailClient } from 'agentmail';
import { replays } from '../../lib/metrics';
import { startInboundWorkflow } from '../start-inbound-workflow';
import type { InboxCursors } from './inbox-cursors';

/**
 * Catch-up after an outage: AgentMail disables a webhook after 5 days of failures and never
 * redelivers what it missed, so we list the inbox ourselves and start each inbound message's
 * workflow under its usual ID. The ID dedupes exactly as for a webhook: a message that already
 * has a workflow is not answered again. Used by `npm run replay`, POST /admin/replay and the
 * webhook watchdog.
 */

export type CatchUpOutcome = 'started' | 'already_answered' | 'skipped' | 'failed';

export interface CatchUpCounts {
  listed: number;
  started: number;
  alreadyAnswered: number;
  /** Our own outbound messages (label `sent`): they are not mail to answer. */
  skipped: number;
  failed: number;
}

export interface CatchUpProgress extends CatchUpCounts {
  inboxId: string;
  pages: number;
}

export interface CatchUpSummary extends CatchUpProgress {
  /** Messages strictly after this time were listed. */
  since: string;
  /** `since` came from the inbox's cursor (less the overlap), not from the caller. */
  resumed: boolean;
  /** The inbox's cursor after the run (null: the inbox has none). */
  cursor: string | null;
  /** Stopped by the caller (Ctrl-C, a closed request) before the last page. */
  interrupted: boolean;
  /** Why the run ended early on its own, e.g. Temporal unreachable. */
  stoppedBecause?: string;
  /** Said when the resume point was moved forward to the retention horizon. */
  note?: string;
}

export interface CatchUpDeps {
  agentmail: AgentMailClient;
  temporal: Client;
  taskQueue: string;
  cursors: InboxCursors;
  operationRetentionDays: number;
}

export interface CatchUpRequest {
  inboxId: string;
  /** List messages after this time; absent: resume from the inbox's cursor, less RESUME_OVERLAP_MS. */
  since?: Date | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((progress: CatchUpProgress) => void) | undefined;
  /** Messages per page (AgentMail's largest, 100, unless a test wants many pages). */
  pageSize?: number | undefined;
}

/** A request the catch-up cannot serve as asked (a person must choose): 400 on the admin route. */
export class CatchUpRequestError extends Error {
  override name = 'CatchUpRequestError';
}

/**
 * A resume starts this long before the cursor: the cursor is the newest message handed over, but
 * an older one may still have been waiting in AgentMail's retries (~27.5 h) when the endpoint
 * went down. Listing it again costs one Temporal call; missing it costs a customer's answer.
 */
export const RESUME_OVERLAP_MS = 28 * 60 * 60 * 1000;
/** AgentMail's largest page. */
const PAGE_SIZE = 100;
/** Starts in flight at once: each is one quick Temporal call; this keeps the server unhurried. */
const START_CONCURRENCY = 8;
/** One start is one Temporal call; past this the server is in trouble and the run says so. */
const START_TIMEOUT_MS = 10_000;
/** This many failed starts in a row mean Temporal is down, not that one message is odd: stop. */
const MAX_CONSECUTIVE_FAILURES = 10;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Replays are safe only while the operation rows exist: past Temporal's retention they are what
 * keeps an answered message from being answered again. A day of margin for the pruning schedule.
 */
export function replayHorizon(operationRetentionDays: number, now = Date.now()): Date {
  return new Date(now - (operationRetentionDays - 1) * DAY_MS);
}

export async function catchUpInbox(deps: CatchUpDeps, request: CatchUpRequest): Promise<CatchUpSummary> {
  const { inboxId, signal, onProgress } = request;
  const { since, resumed, note } = await resolveSince(deps, request);
  const progress: CatchUpProgress = {
    inboxId,
    pages: 0,
    listed: 0,
    started: 0,
    alreadyAnswered: 0,
    skipped: 0,
    failed: 0,
  };
  let failedInARow = 0;
  let lastError = '';
  const givingUp = () => failedInARow >= MAX_CONSECUTIVE_FAILURES;
  const stop = () => Boolean(signal?.aborted) || givingUp();
  // The cursor moves only over an unbroken run of handled messages, so a rerun covers every failure.
  let intact = true;
  let unfinished: boolean;
  let pageToken: string | undefined;

  do {
    if (stop()) {
      unfinished = true;
      break;
    }
    const page = await deps.agentmail.inboxes.messages.list(inboxId, {
      after: since,
      ascending: true,
      limit: request.pageSize ?? PAGE_SIZE,
      ...(pageToken ? { pageToken } : {}),
    });
    progress.pages += 1;
    progress.listed += page.messages.length;
    onProgress?.({ ...progress });

    const outcomes = await mapWithConcurrency(page.messages, START_CONCURRENCY, stop, async (message) => {
      const { outcome, error } = await replayMessage(deps, message);
      count(progress, outcome);
      failedInARow = outcome === 'failed' ? failedInARow + 1 : 0;
      if (error) lastError = error;
      onProgress?.({ ...progress });
      return outcome;
    });

    const firstGap = outcomes.findIndex((outcome) => outcome === undefined || outcome === 'failed');
    if (intact) {
      const newest = page.messages[(firstGap === -1 ? page.messages.length : firstGap) - 1];
      if (newest) await deps.cursors.advance(inboxId, newest.timestamp);
      intact = firstGap === -1;
    }
    unfinished = outcomes.includes(undefined);
    pageToken = page.nextPageToken;
  } while (pageToken || unfinished);

  const cursor = await deps.cursors.get(inboxId);
  return {
    ...progress,
    since: since.toISOString(),
    resumed,
    cursor: cursor?.toISOString() ?? null,
    interrupted: unfinished && Boolean(signal?.aborted),
    ...(givingUp() ? { stoppedBecause: `${failedInARow} workflow starts failed in a row (last: ${lastError})` } : {}),
    ...(note ? { note } : {}),
  };
}

async function resolveSince(
  deps: CatchUpDeps,
  request: CatchUpRequest,
): Promise<{ since: Date; resumed: boolean; note?: string }> {
  const horizon = replayHorizon(deps.operationRetentionDays);
  if (request.since) {
    if (request.since < horizon) {
      throw new CatchUpRequestError(
        `since ${request.since.toISOString()} is older than ${horizon.toISOString()}: operation records are kept ${deps.operationRetentionDays} days ` +
          '(OPERATION_RETENTION_DAYS), and replaying older mail could answer it a second time',
      );
    }
    return { since: request.since, resumed: false };
  }
  const cursor = await deps.cursors.get(request.inboxId);
  if (!cursor) {
    throw new CatchUpRequestError(
      `no message of inbox ${request.inboxId} has been processed yet, so there is nothing to resume from: give a start time (--since)`,
    );
  }
  const since = new Date(cursor.getTime() - RESUME_OVERLAP_MS);
  if (since >= horizon) return { since, resumed: true };
  return {
    since: horizon,
    resumed: true,
    note: `the resume point ${since.toISOString()} is past the replay horizon; listing from ${horizon.toISOString()}`,
  };
}

async function replayMessage(
  deps: CatchUpDeps,
  message: AgentMail.MessageItem,
): Promise<{ outcome: CatchUpOutcome; error?: string }> {
  if (message.labels.includes('sent')) return { outcome: 'skipped' };
  // Labelled by our workflow after its reply went out: answered, no Temporal call needed.
  if (message.labels.includes('replied')) return { outcome: 'already_answered' };
  try {
    const start = await startInboundWorkflow(
      deps.temporal,
      { taskQueue: deps.taskQueue, deadline: new Date(Date.now() + START_TIMEOUT_MS) },
      { inboxId: message.inboxId, messageId: message.messageId, threadId: message.threadId },
    );
    return { outcome: start.started ? 'started' : 'already_answered' };
  } catch (error) {
    return { outcome: 'failed', error: error instanceof Error ? error.message : String(error) };
  }
}

function count(progress: CatchUpCounts, outcome: CatchUpOutcome): void {
  replays.inc({ outcome });
  if (outcome === 'started') progress.started += 1;
  else if (outcome === 'already_answered') progress.alreadyAnswered += 1;
  else if (outcome === 'skipped') progress.skipped += 1;
  else progress.failed += 1;
}

/** Runs `work` over `items`, at most `limit` at a time; items not begun once `stop()` holds stay undefined. */
async function mapWithConcurrency<T, R>(
  items: T[],
  limit: number,
  stop: () => boolean,
  work: (item: T) => Promise<R>,
): Promise<Array<R | undefined>> {
  const results = new Array<R | undefined>(items.length).fill(undefined);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !stop()) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

const UNIT_MS: Record<string, number> = { m: 60_000, h: 60 * 60_000, d: DAY_MS };

/**
 * `--since` / `"since"`: an ISO 8601 time (`2025-12-01T08:00:00Z`, or a date, read as UTC
 * midnight) or an age, `90m`, `36h`, `6d` (that long before now).
 */
export function parseSince(text: string, now = Date.now()): Date {
  const age = /^(\d+)([mhd])$/.exec(text.trim());
  if (age) return new Date(now - Number(age[1]) * (UNIT_MS[age[2] as string] as number));
  const at = /^\d{4}-\d{2}-\d{2}/.test(text.trim()) ? new Date(text.trim()) : new Date(Number.NaN);
  if (Number.isNaN(at.getTime()))
    throw new CatchUpRequestError(
      `since must be an ISO 8601 time (2025-12-01T08:00:00Z) or an age (36h, 6d), got ${JSON.stringify(text)}`,
    );
  return at;
}

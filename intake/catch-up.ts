import type { AgentMail, AgentMailClient } from 'agentmail';
import { inboundWorkflowId } from '../lib/hashing';
import { replays } from '../lib/metrics';
import type { InboxCursors } from './inbox-cursors';
import type { Handover, IntakeStore } from './intake-store';
import { clampMessageTime } from './message-time';

/**
 * Catch-up after an outage: AgentMail disables a webhook after 5 days of failures and never
 * redelivers what it missed, so we list the inbox ourselves and hand each inbound message over
 * through the intake, like a webhook: one intake row per message, keyed by its workflow ID. A
 * message that already has a row (from a webhook, an earlier catch-up, the watchdog) is counted
 * as already handed over, and its workflow is never started twice. The rows are inserted a page
 * at a time and started by the intake relay (every API replica runs one), so handing over
 * thousands of messages takes seconds and never waits on Temporal. Used by `npm run replay`,
 * POST /admin/replay and the webhook watchdog.
 */

export type CatchUpOutcome =
  'handed_over' | 'already_handed_over' | 'already_answered' | 'stopped_by_operator' | 'skipped';

export interface CatchUpCounts {
  listed: number;
  /** New intake rows: the relay starts their workflows. */
  handedOver: number;
  /** An intake row existed: handed over before, by a webhook or an earlier catch-up. */
  alreadyHandedOver: number;
  /** No intake row, but labelled `replied` by our workflow (answered before the row was pruned). */
  alreadyAnswered: number;
  /**
   * The message's last run was terminated or cancelled: a person stopped it, and a catch-up does
   * not undo that (`npm run replay -- --rerun <inbox> <message>` does, on purpose). No row is made.
   */
  stoppedByOperator: number;
  /** Our own outbound messages (label `sent`): they are not mail to answer. */
  skipped: number;
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
  /** Said when the resume point was moved forward to the retention horizon. */
  note?: string;
}

export interface CatchUpDeps {
  agentmail: AgentMailClient;
  /** The intake of the task queue whose relay will start the rows. */
  intake: IntakeStore;
  cursors: InboxCursors;
  operationRetentionDays: number;
  /**
   * Which of these workflows' last runs a person stopped (terminated or cancelled), from Temporal.
   * Absent, or failing (Temporal away): nothing is left out here, and the intake's start finds
   * the stopped run itself and leaves it stopped (intake/start-workflow.ts); only the report's
   * count is then "handed over" instead of "stopped by an operator".
   */
  stoppedRuns?: ((workflowIds: string[]) => Promise<Set<string>>) | undefined;
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
 * went down. Listing it again costs a row lookup; missing it costs a customer's answer.
 */
export const RESUME_OVERLAP_MS = 28 * 60 * 60 * 1000;
/** AgentMail's largest page. */
const PAGE_SIZE = 100;
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
    handedOver: 0,
    alreadyHandedOver: 0,
    alreadyAnswered: 0,
    stoppedByOperator: 0,
    skipped: 0,
  };
  let pageToken: string | undefined;
  let interrupted = false;

  do {
    if (signal?.aborted) {
      interrupted = true;
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
    // The page's rows and the cursor commit together: the cursor never passes a message not handed over.
    for (const [outcome, n] of await handOverPage(deps, inboxId, page.messages)) {
      replays.inc({ outcome }, n);
      count(progress, outcome, n);
    }
    onProgress?.({ ...progress });
    pageToken = page.nextPageToken;
  } while (pageToken);

  const cursor = await deps.cursors.get(inboxId);
  return {
    ...progress,
    since: since.toISOString(),
    resumed,
    cursor: cursor?.toISOString() ?? null,
    interrupted,
    ...(note ? { note } : {}),
  };
}

async function handOverPage(
  deps: CatchUpDeps,
  inboxId: string,
  messages: AgentMail.MessageItem[],
): Promise<Map<CatchUpOutcome, number>> {
  const outcomes = new Map<CatchUpOutcome, number>();
  const add = (outcome: CatchUpOutcome, n: number) => n > 0 && outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + n);
  const inbound = messages.filter((m) => !m.labels.includes('sent'));
  add('skipped', messages.length - inbound.length);
  // Labelled by our workflow after its reply went out: answered. Counted from its row when it has
  // one; no row is made for it (its job is done, whatever the store says).
  const replied = inbound.filter((m) => m.labels.includes('replied'));
  const unanswered = inbound.filter((m) => !m.labels.includes('replied'));
  const stopped = await stoppedAmong(deps, unanswered);
  add('stopped_by_operator', stopped.size);
  const toHandOver = unanswered.filter((m) => !stopped.has(inboundWorkflowId(m)));
  const handovers: Handover[] = toHandOver.map((m) => ({
    inboxId: m.inboxId,
    messageId: m.messageId,
    threadId: m.threadId,
    messageAt: clampMessageTime(new Date(m.timestamp)).at,
  }));
  const times = messages.map((m) => clampMessageTime(new Date(m.timestamp)).at.getTime());
  const newest = times.length > 0 ? new Date(Math.max(...times)) : undefined;
  const { created } = await deps.intake.acceptBatch(inboxId, handovers, newest);
  add('handed_over', created.size);
  add('already_handed_over', handovers.length - created.size);
  const repliedRows = await deps.intake.handedOver(replied.map((m) => inboundWorkflowId(m)));
  add('already_handed_over', repliedRows.size);
  add('already_answered', replied.length - repliedRows.size);
  return outcomes;
}

/** The page's messages whose last run a person stopped; none when Temporal cannot say (see CatchUpDeps). */
async function stoppedAmong(deps: CatchUpDeps, messages: AgentMail.MessageItem[]): Promise<Set<string>> {
  if (!deps.stoppedRuns || messages.length === 0) return new Set();
  try {
    return await deps.stoppedRuns(messages.map((m) => inboundWorkflowId(m)));
  } catch {
    // Temporal away: the catch-up needs none (the rows wait for the relay), and the start checks again.
    return new Set();
  }
}

function count(progress: CatchUpCounts, outcome: CatchUpOutcome, n: number): void {
  if (outcome === 'handed_over') progress.handedOver += n;
  else if (outcome === 'already_handed_over') progress.alreadyHandedOver += n;
  else if (outcome === 'already_answered') progress.alreadyAnswered += n;
  else if (outcome === 'stopped_by_operator') progress.stoppedByOperator += n;
  else progress.skipped += n;
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

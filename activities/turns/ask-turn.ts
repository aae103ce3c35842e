import { Context, log } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { AgentMail, AgentMailClient } from 'agentmail';
import {
  draftKey,
  type MessageRef,
  OperationKind,
  replyKey,
  type RunRef,
  type TurnAnswer,
  type TurnHandBack,
  turnSignal,
} from '../../contract';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { failpoint } from '../../lib/failpoints';
import { addressHash, threadKeyOf } from '../../lib/hashing';
import { fetchMessage, recentThread } from '../agentmail/reads';
import { senderOf } from '../agentmail/recipients';
import type { OperationStore } from '../operation-store/store';
import type { StoredDraft } from '../draft/draft-store';
import { personAnswering } from './person-answering';
import {
  ask,
  due,
  type HolderEnd,
  holderToLook,
  nextWakeAt,
  polled,
  release,
  type Tell,
  type ThreadTurns,
  type TurnAsk,
} from './rule';
import { changeTurns } from './turn-table';

export interface TurnDeps {
  agentmail: AgentMailClient;
  db: Db;
  config: Pick<ActivityConfig, 'REPLY_COALESCE_MS' | 'TURN_REASK_MS' | 'HANDBACK_AFTER'>;
}

export interface AskTurnInput extends MessageRef, RunRef {
  threadId: string;
  /** On a repeated ask after waiting: how long the run waited since its last ask. */
  waitedMs?: number;
}

/** What the ask found: the turn asked for (its answer now, or later by signal), or no turn needed at all. */
export type AskTurnAnswer =
  | {
      kind: 'asked';
      threadKey: string;
      sender: string;
      timestampMs: number;
      /** How long this message's burst window has still to run (0: ended). */
      burstLeftMs: number;
      /** Whether the turn will not come at once (a burst window open, a newer message awaited): the run shows it waits (behind a holder, `answer` says so). */
      waits: boolean;
      /** When to ask again if no answer came: when the thread's turn is next due, and at most TURN_REASK_MS after the first wait, twice the last wait after a later one (up to 15 min). */
      reaskMs: number;
      /** This run's answer when the ask decided it (the turn was free, a sent reply covers it, it waits behind a holder); else it comes by the `turn` signal. */
      answer?: TurnAnswer;
    }
  /**
   * The message's burst window (REPLY_COALESCE_MS from its time) is still open: nothing is asked yet.
   * The run waits it out and asks again, reading the thread afresh, so the sender's messages written
   * meanwhile are named even when their webhooks come late, and the burst is answered once.
   */
  | { kind: 'burst'; burstLeftMs: number }
  /** A reply of ours that was sent already answers it: its draft read this older message of the same sender. */
  | { kind: 'covered'; by: string }
  /** A person of the team answers this thread (a message of ours the agent did not send). */
  | { kind: 'person-answering' };

/**
 * How old a read of the thread the first ask takes: the decision's, read moments ago in the same
 * workflow task (activities/agentmail/reads.ts). A repeated ask always reads afresh.
 */
const THREAD_READ_MAX_AGE_MS = 2_000;

/**
 * Asks for this message's turn in its thread's row (activities/turns/turn-table.ts): the answer comes
 * back at once when the ask decides it, else by the `turn` signal when the holder gives the turn back.
 */
export async function askTurn(
  deps: TurnDeps & { store: Pick<OperationStore, 'completed'> },
  input: AskTurnInput & { again?: boolean },
): Promise<AskTurnAnswer> {
  // A rerun of an answered message (`npm run replay -- --rerun`, or `temporal workflow start
  // --id-reuse-policy AllowDuplicate` as docs/operations.md prints it) replays its sent reply from
  // the store: it needs no turn, and AgentMail may no longer have its message or thread to read.
  if (await replyAlreadySent(deps, input)) return grantOwnTurn(deps, input);
  const { thread } = await recentThread(deps.agentmail, input, input.again ? 0 : THREAD_READ_MAX_AGE_MS);
  const message =
    thread.messages.find((m) => m.messageId === input.messageId) ?? (await fetchMessage(deps.agentmail, input));
  if (await personAnswering(deps.db, input, thread.messages, deps.config.HANDBACK_AFTER)) {
    return { kind: 'person-answering' };
  }
  const sender = senderKey(message);
  const coveredBy = await sentReplyCovering(deps.store, input.inboxId, thread.messages, message, sender);
  if (coveredBy !== null) return { kind: 'covered', by: coveredBy };
  // Only the first ask waits for the window (a message dated in the future counts from now), so a
  // repeat always reaches the row.
  const openForMs = Math.min(message.timestamp.getTime(), Date.now()) + deps.config.REPLY_COALESCE_MS - Date.now();
  if (!input.again && openForMs > 0) return { kind: 'burst', burstLeftMs: openForMs };

  const threadKey = threadKeyOf(input.inboxId, input.threadId);
  const request: TurnAsk = {
    inboxId: input.inboxId,
    threadId: input.threadId,
    workflowId: input.workflowId,
    runId: input.runId,
    messageId: input.messageId,
    timestampMs: message.timestamp.getTime(),
    sender,
    coalesceMs: deps.config.REPLY_COALESCE_MS,
  };
  const newer =
    deps.config.REPLY_COALESCE_MS > 0
      ? burstOfSender(thread.messages, message, sender, deps.config.REPLY_COALESCE_MS)
      : [];
  if (newer.length > 0) request.newer = newer;
  const changed = await changeTurns(deps.db, threadKey, (turns, now) => [
    ...ask(turns, request, now),
    ...due(turns, now),
  ]);
  failpoint('turn.after-request');
  const { answer, thread: turns } = await settle(deps, threadKey, changed, input.runId);
  const burstLeftMs = Math.max(0, request.timestampMs + request.coalesceMs - Date.now());
  const wakeAt = nextWakeAt(turns);
  const reaskMs = reaskAfter(
    input.waitedMs,
    deps.config.TURN_REASK_MS,
    wakeAt === undefined ? undefined : wakeAt - Date.now(),
  );
  return {
    kind: 'asked',
    threadKey,
    sender,
    timestampMs: request.timestampMs,
    burstLeftMs,
    waits: burstLeftMs > 0 || newer.length > 0,
    reaskMs,
    ...(answer === undefined ? {} : { answer }),
  };
}

/** A waiting run asks again no sooner than this… */
const MIN_REASK_MS = 500;
/** …and no later than this. */
export const MAX_REASK_MS = 15 * 60 * 1000;

/**
 * When a waiting run asks again: when its thread's turn is next due (a burst ends, the holder's next
 * look: `dueInMs`), and at the latest `turnReaskMs` after its wait began, then twice its last wait
 * (`waitedMs`), up to MAX_REASK_MS. A lost signal, or a holder gone without a word, never wedges it,
 * and a run that waits days behind an approval asks a few times an hour, not every minute.
 */
export function reaskAfter(waitedMs: number | undefined, turnReaskMs: number, dueInMs: number | undefined): number {
  const longest = waitedMs === undefined ? turnReaskMs : Math.min(2 * waitedMs, MAX_REASK_MS);
  return Math.min(longest, dueInMs === undefined ? Infinity : Math.max(MIN_REASK_MS, dueInMs));
}

/**
 * Tells the runs their answers (this run's own is returned, not signalled) and does what follows: a
 * `go` to a run that is gone (terminated) passes the turn on, and a holder someone waits behind whose
 * look is due is looked at (is its run still open?), which may pass the turn on too. A run not told
 * (a signal that failed, a crash here) hears it when it asks again: the row keeps every answer.
 */
async function settle(
  deps: TurnDeps & { store: Pick<OperationStore, 'completed'> },
  threadKey: string,
  changed: { tells: Tell[]; thread: ThreadTurns },
  self: string,
): Promise<{ answer?: TurnAnswer; thread: ThreadTurns }> {
  let { tells, thread } = changed;
  let answer: TurnAnswer | undefined;
  for (let round = 0; round < SETTLE_ROUNDS; round++) {
    const gone: string[] = [];
    for (const tell of tells) if (tell.runId === self) answer = tell.grant;
    await Promise.all(
      tells
        .filter((tell) => tell.runId !== self)
        .map(async (tell) => {
          if (!(await signalRun(tell)) && tell.grant.kind === 'go') gone.push(tell.runId);
        }),
    );
    const look = holderToLook(thread, Date.now());
    if (gone.length === 0 && look === null) break;
    const end = look === null ? null : await holderEnd(deps, { ...look, inboxId: thread.inboxId ?? '' });
    ({ tells, thread } = await changeTurns(deps.db, threadKey, (turns, now) => [
      ...gone.flatMap((runId) => release(turns, runId, null)),
      ...(look === null || end === null ? [] : polled(turns, look.runId, end, now)),
      ...due(turns, now),
    ]));
  }
  return { ...(answer === undefined ? {} : { answer }), thread };
}

/** Rounds of telling and looking one ask or release goes through at most (each passes the turn at most once). */
const SETTLE_ROUNDS = 5;

/** Signals a run its answer; false when the run is closed (it will never ask again). */
async function signalRun(tell: Tell): Promise<boolean> {
  try {
    await Context.current().client.workflow.getHandle(tell.workflowId, tell.runId).signal(turnSignal, tell.grant);
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    // Not told now (the server busy, restarting): the run asks again on its timer and is told then.
    log.warn('a turn answer could not be signalled; the run hears it when it asks again', {
      workflowId: tell.workflowId,
      error: String(error),
    });
    return true;
  }
}

/**
 * Whether this message's reply is already sent (either version: as drafted, or a reviewer's edit),
 * by the store alone.
 */
async function replyAlreadySent(deps: { store: Pick<OperationStore, 'completed'> }, ref: MessageRef): Promise<boolean> {
  for (const version of [1, 2] as const)
    if ((await deps.store.completed(replyKey(ref, version), OperationKind.reply)) !== undefined) return true;
  return false;
}

/**
 * The turn of a message whose reply is in the store: `go` for itself, asked of no row (`threadKey`
 * '' gives nothing back), so the run goes on to replay its steps without a read of AgentMail.
 */
function grantOwnTurn(deps: Pick<TurnDeps, 'config'>, input: AskTurnInput): AskTurnAnswer {
  return {
    kind: 'asked',
    threadKey: '',
    sender: '',
    timestampMs: 0,
    burstLeftMs: 0,
    waits: false,
    reaskMs: deps.config.TURN_REASK_MS,
    answer: { kind: 'go', covers: [input.messageId] },
  };
}

/** Gives the turn back, saying whether the reply was sent, and tells the runs the turn goes to. */
export async function releaseTurn(
  deps: TurnDeps & { store: Pick<OperationStore, 'completed'> },
  input: TurnHandBack,
): Promise<void> {
  if (input.threadKey === '') return; // no turn held
  const { threadKey, runId, ...released } = input;
  const changed = await changeTurns(deps.db, threadKey, (turns, now) => [
    ...release(turns, runId, released),
    ...due(turns, now),
  ]);
  await settle(deps, threadKey, changed, runId);
}

/**
 * How a holder stands: open, closed, or closed with its reply sent (our store says; the row then
 * covers as the holder's release would have, had it come first).
 */
async function holderEnd(
  deps: { store: Pick<OperationStore, 'completed'> },
  holder: RunRef & MessageRef,
): Promise<HolderEnd> {
  if (await isOpen(holder)) return 'open';
  return (await replyAlreadySent(deps, holder)) ? 'sent' : 'closed';
}

async function isOpen(run: RunRef): Promise<boolean> {
  try {
    const described = await Context.current().client.workflow.getHandle(run.workflowId, run.runId).describe();
    return described.status.name === 'RUNNING';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return false;
    throw error;
  }
}

/** A hash of the sender's mailbox (never the address itself: asks are kept in history). */
export function senderKey(message: Pick<AgentMail.Message, 'from'>): string {
  const sender = senderOf(message);
  return addressHash(sender?.normalized ?? message.from).slice(0, 16);
}

type ThreadMessage = Pick<AgentMail.Message, 'messageId' | 'timestamp' | 'labels' | 'from' | 'inReplyTo'>;

/** The newer messages of a sender looked at for a reply that answered this one, at most. */
const COVERING_CANDIDATES = 20;

/**
 * The newer message of the same sender whose reply was sent and whose draft read this one: that
 * reply answered it. Asked of our store, which has the reply the moment it went out and what its
 * draft read, not of AgentMail's listing, which may show the reply seconds later (a message whose
 * webhook came in that gap was answered a second time).
 */
async function sentReplyCovering(
  store: Pick<OperationStore, 'completed'>,
  inboxId: string,
  messages: readonly ThreadMessage[],
  message: ThreadMessage,
  sender: string,
): Promise<string | null> {
  const at = (m: ThreadMessage) => m.timestamp.getTime();
  const newer = messages
    .filter(
      (m) =>
        m.messageId !== message.messageId &&
        !m.labels.includes('sent') &&
        senderKey(m) === sender &&
        (at(m) > at(message) || (at(m) === at(message) && m.messageId > message.messageId)),
    )
    .sort((a, b) => at(a) - at(b))
    .slice(0, COVERING_CANDIDATES);
  for (const candidate of newer) {
    const ref = { inboxId, messageId: candidate.messageId };
    if (!(await replyAlreadySent({ store }, ref))) continue;
    // The reviewer's edit (version 2) answers what the first draft read.
    const draft = await store.completed<StoredDraft>(draftKey(ref), OperationKind.draft);
    if (draft?.read?.includes(message.messageId)) return candidate.messageId;
  }
  return null;
}

/**
 * The sender's other messages of this burst that the turn waits for (ids, the newest 20): those after
 * this one, and those before it by less than the window (`coalesceMs`), after our last reply in the
 * thread. The older ones are named because the asks of a burst whose windows end together race: the
 * newest may reach the row first, and would otherwise take the turn for itself alone.
 */
export function burstOfSender(
  messages: readonly ThreadMessage[],
  message: ThreadMessage,
  sender: string,
  coalesceMs: number,
): string[] {
  const at = (m: ThreadMessage) => m.timestamp.getTime();
  const lastReply = Math.max(-Infinity, ...messages.filter((m) => m.labels.includes('sent')).map(at));
  return messages
    .filter(
      (m) =>
        m.messageId !== message.messageId &&
        !m.labels.includes('sent') &&
        at(m) > lastReply &&
        at(m) > at(message) - coalesceMs &&
        senderKey(m) === sender,
    )
    .sort((a, b) => at(a) - at(b))
    .map((m) => m.messageId)
    .slice(-20);
}

import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { AgentMail, AgentMailClient } from 'agentmail';
import {
  askTurnSignal,
  draftKey,
  type HeldTurn,
  type HolderEnd,
  messageTaskQueueOf,
  KEEPER_TASK_TIMEOUT_MS,
  type MessageRef,
  OperationKind,
  releaseTurnSignal,
  replyKey,
  type RunRef,
  SearchAttributes,
  type TurnAsk,
  TURN_KEEPER_WORKFLOW,
  type TurnHandBack,
  type TurnKeeperInput,
  turnKeeperTaskQueue,
  turnSignal,
} from '../../contract';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { failpoint } from '../../lib/failpoints';
import { addressHash, threadTurnKeeper } from '../../lib/hashing';
import { fetchMessage, recentThread } from '../agentmail/reads';
import { senderOf } from '../agentmail/recipients';
import type { OperationStore } from '../operation-store/store';
import type { StoredDraft } from '../draft/draft-store';
import { personAnswering } from './person-answering';

export interface TurnDeps {
  agentmail: AgentMailClient;
  db: Db;
  config: Pick<ActivityConfig, 'REPLY_COALESCE_MS' | 'TURN_REASK_MS' | 'HANDBACK_AFTER'>;
}

export interface AskTurnInput extends MessageRef, RunRef {
  threadId: string;
}

/** What the ask found: the turn asked for (its answer comes by signal), or no turn needed at all. */
export type AskTurnAnswer =
  | {
      kind: 'asked';
      keeperWorkflowId: string;
      threadKey: string;
      sender: string;
      timestampMs: number;
      /** How long this message's burst window has still to run (0: ended). */
      burstLeftMs: number;
      /** Whether the turn will not come at once (a burst window open, a newer message awaited): the run shows it waits (behind a holder, the keeper says so). */
      waits: boolean;
      /** When to ask again if no answer came (TURN_REASK_MS): nothing lives only in a keeper. */
      reaskMs: number;
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

/** The statuses of a run that holds its thread's turn (workflows/inbound-message.ts sets them only after `go`). */
const HOLDING = ['drafting', 'awaiting_approval', 'escalated', 'held', 'handed_off', 'sending'];

/**
 * Asks the thread's keeper for this message's turn, by signal-with-start (the first ask starts the
 * keeper, or a fresh one after an operator terminated it, which first adopts the runs holding turns).
 */
export async function askTurn(
  deps: TurnDeps & { store: Pick<OperationStore, 'completed'> },
  input: AskTurnInput & { again?: boolean },
): Promise<AskTurnAnswer> {
  // A rerun of an answered message (`npm run replay -- --rerun`, or `temporal workflow start
  // --id-reuse-policy AllowDuplicate` as docs/operations.md prints it) replays its sent reply from
  // the store: it needs no keeper, and AgentMail may no longer have its message or thread to read.
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
  // repeat always reaches the keeper.
  const openForMs = Math.min(message.timestamp.getTime(), Date.now()) + deps.config.REPLY_COALESCE_MS - Date.now();
  if (!input.again && openForMs > 0) return { kind: 'burst', burstLeftMs: openForMs };

  const client = Context.current().client;
  const { workflowId, threadKey, index } = threadTurnKeeper(
    input.inboxId,
    input.threadId,
    Context.current().info.taskQueue,
  );
  const request: TurnAsk = {
    threadKey,
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
  const args: [TurnKeeperInput] = [{ index }];
  await client.workflow.signalWithStart(TURN_KEEPER_WORKFLOW, {
    workflowId,
    taskQueue: turnKeeperTaskQueue(Context.current().info.taskQueue),
    args,
    workflowTaskTimeout: KEEPER_TASK_TIMEOUT_MS,
    signal: askTurnSignal,
    signalArgs: [request],
  });
  failpoint('turn.after-request');
  const burstLeftMs = Math.max(0, request.timestampMs + request.coalesceMs - Date.now());
  return {
    kind: 'asked',
    keeperWorkflowId: workflowId,
    threadKey,
    sender,
    timestampMs: request.timestampMs,
    burstLeftMs,
    waits: burstLeftMs > 0 || newer.length > 0,
    reaskMs: deps.config.TURN_REASK_MS,
  };
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
 * The turn of a message whose reply is in the store: its own run is told `go` (the `turn` signal a
 * keeper would send), and no keeper is asked (`keeperWorkflowId` '' gives nothing back), so the run
 * goes on to replay its steps without a read of AgentMail.
 */
async function grantOwnTurn(deps: Pick<TurnDeps, 'config'>, input: AskTurnInput): Promise<AskTurnAnswer> {
  await Context.current()
    .client.workflow.getHandle(input.workflowId, input.runId)
    .signal(turnSignal, { kind: 'go', covers: [input.messageId] });
  return {
    kind: 'asked',
    keeperWorkflowId: '',
    threadKey: '',
    sender: '',
    timestampMs: 0,
    burstLeftMs: 0,
    waits: false,
    reaskMs: deps.config.TURN_REASK_MS,
  };
}

/** Gives the turn back, saying whether the reply was sent. A keeper that is gone holds no turn. */
export async function releaseTurn(input: TurnHandBack): Promise<void> {
  if (input.keeperWorkflowId === '') return; // no turn held
  const { keeperWorkflowId, ...release } = input;
  try {
    await Context.current().client.workflow.getHandle(keeperWorkflowId).signal(releaseTurnSignal, release);
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return;
    throw error;
  }
}

/**
 * How these holders stand, in order: open, closed, or closed with their reply sent (our store says;
 * the keeper then covers as the holder's release would have, had it come first).
 */
export async function holderEnds(
  deps: { store: Pick<OperationStore, 'completed'> },
  input: { holders: Array<RunRef & MessageRef> },
): Promise<HolderEnd[]> {
  const AT_ONCE = 16; // a handful at a time, so the server is not flooded
  const end = async (holder: RunRef & MessageRef): Promise<HolderEnd> => {
    if (await isOpen(holder)) return 'open';
    return (await replyAlreadySent(deps, holder)) ? 'sent' : 'closed';
  };
  const results: HolderEnd[] = [];
  for (let i = 0; i < input.holders.length; i += AT_ONCE)
    results.push(...(await Promise.all(input.holders.slice(i, i + AT_ONCE).map(end))));
  return results;
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
 * newest may reach the keeper first, and would otherwise take the turn for itself alone.
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

/** The holding runs a keeper that starts afresh looks at, at most (each costs a read of its message). */
const HELD_TURNS_MAX = 2_000;

/**
 * The runs Temporal lists as holding a turn in this keeper's threads: what a keeper that starts
 * afresh adopts before it grants anything (workflows/turns/state.ts `adopt`). Each holder's sender
 * and time come from AgentMail's copy of its message, so the keeper covers as its release would.
 * Visibility may lag a run granted a second before its keeper was terminated (docs/conversations.md).
 */
export async function heldTurns(deps: Pick<TurnDeps, 'agentmail'>, input: { index: number }): Promise<HeldTurn[]> {
  const messageQueue = messageTaskQueueOf(Context.current().info.taskQueue);
  const quote = (value: string) => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const query = [
    `WorkflowType = 'inboundMessageWorkflow'`,
    `ExecutionStatus = 'Running'`,
    `TaskQueue = ${quote(messageQueue)}`,
    `ReplyStatus IN (${HOLDING.map(quote).join(', ')})`,
  ].join(' AND ');
  const held: HeldTurn[] = [];
  let seen = 0;
  for await (const run of Context.current().client.workflow.list({ query, pageSize: 500 })) {
    if (++seen > HELD_TURNS_MAX) break;
    const inboxId = run.typedSearchAttributes.get(SearchAttributes.InboxId);
    const threadId = run.typedSearchAttributes.get(SearchAttributes.ThreadId);
    const messageId = run.typedSearchAttributes.get(SearchAttributes.MessageId);
    if (inboxId === undefined || threadId === undefined || messageId === undefined) continue;
    const { threadKey, index } = threadTurnKeeper(inboxId, threadId, messageQueue);
    if (index !== input.index) continue;
    const message = await fetchMessage(deps.agentmail, { inboxId, messageId }).catch(() => null);
    held.push({
      workflowId: run.workflowId,
      runId: run.runId,
      threadKey,
      inboxId,
      threadId,
      messageId,
      ...(message ? { sender: senderKey(message), timestampMs: message.timestamp.getTime() } : {}),
    });
  }
  return held;
}

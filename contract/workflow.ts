/**
 * The contract between the ingress, operators and the workflow: names, inputs, results,
 * search attributes, queries. Kept free of I/O so workflow code can import it.
 */
import { defineSearchAttributeKey } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

export const INBOUND_MESSAGE_WORKFLOW = 'inboundMessageWorkflow';

export interface InboundMessageInput {
  inboxId: string;
  messageId: string;
  /** The webhook event that started it, for the logs; absent on manual starts and replays. */
  eventId?: string;
}

/**
 * Where a message stands. Four wait for a person's verdict: `awaiting_approval` (an inbox that
 * requires approval), `escalated` (the same, past APPROVAL_TIMEOUT_MS), `held` (a drafted reply
 * tripped a rule — a link, an address, an echo of the instructions — in an inbox that needs no
 * approval: it is never sent unless a person approves) and `handed_off` when HANDOFF=review.
 * `answered-together`: covered by a later message's reply in the same thread.
 */
export type ReplyStatus =
  | 'deciding'
  | 'drafting'
  | 'awaiting_approval'
  | 'escalated'
  | 'held'
  | 'handed_off'
  | 'sending'
  | 'sent'
  | 'rejected'
  | 'skipped'
  | 'failed'
  /** Waiting for the thread's turn (conversations: one message of a thread at a time). */
  | 'waiting_turn'
  /** Covered by a later message's reply: the burst was answered once (CoveredBy names that message). */
  | 'answered-together'
  /**
   * The customer asked to be forgotten (privacy/erase.ts): an activity answered `Erased` and the
   * run ended without drafting, sending, ticketing or notifying anything more.
   */
  | 'erased';

/**
 * The rules a drafted reply (the model's, never a reviewer's edit) is checked against before it may
 * go out unread (activities/draft/draft-check.ts): a link to a host outside DRAFT_ALLOWED_LINK_DOMAINS,
 * an address that is neither ours nor the customer's, a run of 12 or more words of the instructions.
 */
export type HoldRule = 'link' | 'address' | 'instructions';

/** What each rule is called where a person reads it: the review's reason, the ticket, `SkipReason`. */
export const HOLD_RULES: Readonly<Record<HoldRule, string>> = {
  link: 'a link outside the allowed domains',
  address: "an address that is neither ours nor the customer's",
  instructions: 'an echo of the inbox instructions',
};

export type InboundMessageResult =
  | {
      status: 'sent';
      replyMessageId: string;
      replyThreadId: string;
      ticketId: string | null;
      replayed: boolean;
      replyVersion: number;
      /** The inbound messages this reply answers, oldest first, this message last (a burst answered once). */
      covers: string[];
    }
  | { status: 'rejected'; ticketId: string | null; covers: string[] }
  /** HANDOFF=ticket: the draft handed the message to a person; the ticket holds the reason, nothing was sent. */
  | { status: 'handed_off'; ticketId: string | null; covers: string[] }
  /** A later message of the same thread answered this one with its own reply. */
  | { status: 'answered-together'; coveredBy: string; ticketId: string | null }
  | { status: 'skipped'; reason: string; ticketId: string | null }
  /** The message was erased (FailureType.Erased): nothing of it is kept, nothing more was done. */
  | { status: 'erased' };

/**
 * A person's verdict on a drafted reply, from the admin route, the desk, the Web UI or
 * `temporal workflow update|signal`. Accepted only while a verdict is awaited (ReplyStatus
 * awaiting_approval, escalated, held, or handed_off under review), for the revision awaiting it,
 * and only once; anything else is refused (`ReviewRefused`). `text` replaces the drafted text: a
 * changed intent, so it is sent under the next key version (…/reply/v2), never under v1's key.
 * Note that a signal's or update's payload is kept in the workflow's history: an edited text
 * passes through it.
 */
export interface ReviewInput {
  verdict: 'approve' | 'reject';
  /** The draft's revision the verdict judges, as `reviewState` showed it: a stale one is refused. */
  revision: number;
  text?: string;
  /**
   * The reviewer's id, set by the API or the desk from the verified credential (review/reviewers.ts),
   * never taken from a request body. Sent straight through Temporal, it is whatever the operator typed.
   */
  reviewer: string;
}

export type ReviewVerdict = Pick<ReviewInput, 'verdict' | 'revision' | 'reviewer'>;

/** Answered once the workflow accepted the verdict; a refusal is a failed Update (`ReviewRefused`, `InvalidReview`). */
export const reviewUpdate = defineUpdate<{ accepted: true; revision: number }, [ReviewInput]>('review');
/** The same, fire and forget (what the Web UI's "Send a Signal" and `temporal workflow signal` do); a refused one is logged and dropped. */
export const reviewSignal = defineSignal<[ReviewInput]>('review');

/**
 * What a reviewer (the desk, the admin route) needs to judge: the status, the revision and draft
 * key awaiting a verdict (null when none is awaited; the text is read from the operation store by
 * `draftKey`), why a person must look (`approval required`, `held: <rule>`, `handoff: <reason>`),
 * and the verdict once one stands. Ids and rule names only, never text.
 */
export interface ReviewState {
  status: ReplyStatus;
  revision: number | null;
  draftKey: string | null;
  reason: string | null;
  verdict: ReviewVerdict | null;
}

export const reviewStateQuery = defineQuery<ReviewState>('reviewState');

/**
 * What an effect activity reports about its own operation, from the operation store's answer:
 * `executed` by this attempt, or `replayed` from the stored result of an earlier one.
 */
export interface OperationReport {
  key: string;
  kind: string;
  state: 'executed' | 'replayed';
}

/**
 * One line of the `operations` query: the activities' own reports, plus the operations the
 * workflow has asked for whose report is not in (`pending`), which failed, or which it will
 * not run (`skipped`: the reply after a rejection).
 */
export interface OperationView {
  key: string;
  kind: string;
  status: OperationReport['state'] | 'pending' | 'failed' | 'skipped';
  summary?: string;
}

export const operationsQuery = defineQuery<OperationView[]>('operations');

export const SearchAttributes = {
  InboxId: defineSearchAttributeKey('InboxId', 'KEYWORD'),
  MessageId: defineSearchAttributeKey('MessageId', 'KEYWORD'),
  ThreadId: defineSearchAttributeKey('ThreadId', 'KEYWORD'),
  ReplyStatus: defineSearchAttributeKey('ReplyStatus', 'KEYWORD'),
  /** Why a message was not answered (ReplyStatus=skipped), e.g. inbox-ceiling-reached: findable in the Web UI. */
  SkipReason: defineSearchAttributeKey('SkipReason', 'KEYWORD'),
  /** The message whose reply answered this one too (ReplyStatus=answered-together): the link in the Web UI. */
  CoveredBy: defineSearchAttributeKey('CoveredBy', 'KEYWORD'),
} as const;

/** The custom search attributes' names, all Keyword: what the namespace set-up registers (scripts/services/). */
export const SEARCH_ATTRIBUTE_NAMES = Object.values(SearchAttributes).map((key) => key.name);

export const THREAD_WORKFLOW = 'threadWorkflow';

/**
 * A thread's turn keeper (workflows/thread.ts), one per AgentMail thread, its id from inbox_id +
 * thread_id. Message workflows ask it for their turn by signal-with-start; it answers each one,
 * in the order of the messages' timestamps, with a `turn` signal.
 */
export interface ThreadInput {
  inboxId: string;
  threadId: string;
  /** Carried over by continue-as-new. */
  state?: ThreadState;
}

/** A message workflow that asked for its turn. Ids and times only. */
export interface TurnRequest {
  workflowId: string;
  /** The run that asked: a replayed message (a new run) asks again and is answered again. */
  runId: string;
  messageId: string;
  /** The message's timestamp at AgentMail (ms since the epoch): the thread's order. */
  timestampMs: number;
  /** REPLY_COALESCE_MS as the asking worker has it: how long a burst may go on before it is answered. */
  coalesceMs: number;
}

/**
 * The thread's answer: `go` — draft and send one reply answering `covers` (oldest first, the
 * receiver last), then release the turn; `covered` — a later message's reply answers this one.
 */
export type TurnGrant = { kind: 'go'; covers: string[] } | { kind: 'covered'; by: string };

export interface ThreadState {
  waiting: TurnRequest[];
  holder: { workflowId: string; runId: string; messageId: string; covers: string[] } | null;
  /** Runs answered lately (by run id), so a repeated request (a retried signal) is not answered twice. */
  answered: string[];
}

export const turnRequestSignal = defineSignal<[TurnRequest]>('requestTurn');
export const turnSignal = defineSignal<[TurnGrant]>('turn');
/** Sent by the holder when its reply is done (sent, rejected, or failed): the next turn may go. */
export const releaseTurnSignal = defineSignal<[{ runId: string }]>('releaseTurn');
export const threadStateQuery = defineQuery<ThreadState>('threadState');

/**
 * The turn keepers shared by many threads (workflows/turn-keeper.ts): a thread is hashed onto
 * one of TURN_KEEPERS workflows per task queue (`inbound-turns-<task queue>-<n>`, see
 * lib/hashing.ts), which hands out its turns. A message whose thread is free learns so from the
 * result of the `takeTurn` Update its local activity sends (update-with-start), with no signal back;
 * one that must wait is queued and answered by the `turn` signal, as the per-thread keeper does.
 * The count is part of every thread's address: changing it re-homes threads, so it is fixed.
 */
export const TURN_KEEPER_WORKFLOW = 'turnKeeperWorkflow';
/**
 * The keepers run on a task queue of their own beside the main one, polled by the same worker
 * process (worker/create-worker.ts): a message waiting for its keeper's answer holds a workflow-task
 * slot of the main queue, and the keeper must never wait for one of those.
 */
export const turnKeeperTaskQueue = (taskQueue: string): string => `${taskQueue}-turns`;
export const TURN_KEEPERS = 32;
/**
 * How a keeper's workflow tasks are timed. A keeper answers every thread it keeps, so while its
 * task is lost it answers none: a worker that dies holding a keeper's task, or holding the keeper in
 * its cache (its next task is queued for that worker alone), stalls all those threads until Temporal
 * gives the task to another worker. Temporal's defaults (10 s each) would stall half the keepers
 * for 10 s whenever one of two workers dies; the keepers' tasks are small (no I/O but a rare look at
 * which runs closed, a few hundred events to replay at most), so both are short.
 */
export const KEEPER_TASK_TIMEOUT_MS = 3_000;
/** The same for the keepers' sticky queue: a keeper's next task waits this long for its cached worker. */
export const KEEPER_STICKY_TIMEOUT_MS = 1_000;
/**
 * How long a message's turn request waits for its keeper to answer the Update (normally tens of
 * milliseconds) before it asks by signal instead and lets its workflow task go: the wait holds a
 * workflow-task slot of its worker, and a keeper that lost its worker takes seconds to come back.
 */
export const TURN_UPDATE_WAIT_MS = 3_000;
/** The keeper's patch for one idle timer per run (not one per wait) and no kept `go` answers. */
export const KEEPER_LEAN_PATCH = 'keeper-lean';
/** The keeper's patch that tells by signal an answer a run's Update may not have received. */
export const KEEPER_RETELLS_PATCH = 'keeper-retells-by-signal';
/**
 * The keeper's patch that tells by signal a turn an Update gives to a run that had also asked by
 * signal: that run's local activity stopped waiting for an Update (perhaps this very one, delivered
 * late) and waits for the `turn` signal.
 */
export const KEEPER_TELLS_SIGNALLED_PATCH = 'keeper-tells-signalled-runs';
/**
 * The keeper's patch that waits at least NAMED_NEWER_WAIT_MS (workflows/turn-keeper.ts), not only
 * REPLY_COALESCE_MS, for a newer message a request names to ask for its turn.
 */
export const KEEPER_WAITS_FOR_NAMED_PATCH = 'keeper-waits-for-named';
/**
 * The keeper's patch that takes the run a request names as `loneHolder` as the holder of a thread
 * whose turn it sees free: a thread's only message takes its turn without asking.
 */
export const KEEPER_ADOPTS_LONE_HOLDER_PATCH = 'keeper-adopts-lone-holder';
/** The message workflow's patch (patched()) that moved it from the per-thread keeper to the shared ones. */
export const SHARED_TURN_KEEPERS_PATCH = 'shared-turn-keepers';
/** The keeper's patch (patched()) that continues it as new at 500 events instead of 5,000. */
export const KEEPER_SHORT_RUNS_PATCH = 'keeper-short-runs';
/** The keeper's patch that continues it as new at 150 events instead of 500 (workflows/turn-keeper.ts). */
export const KEEPER_RUNS_OF_150_PATCH = 'keeper-runs-of-150';

/** What a shared keeper asks of one thread's request: the thread's key and ids travel with it. */
export interface ThreadTurnRequest extends TurnRequest {
  /** The thread's key (a hash of inbox_id + thread_id): the keeper's index. */
  threadKey: string;
  /** For the Web UI's Current details: which conversation it is (ids, not text). */
  inboxId: string;
  threadId: string;
  /**
   * A run the asker found closed (Temporal said so): the holder the keeper named in its `queued`
   * answer. A closed run stays closed, so the keeper may take this at its word and let the turn go on.
   */
  closedHolderRunId?: string;
  /**
   * The thread's inbound messages newer than this one and than our last reply in it, as AgentMail
   * had them when the asker looked (ids, at most NEWER_LISTED): messages that will ask for their
   * turn, and whose reply should answer this one too. The keeper waits a while for them to ask.
   */
  newer?: string[];
  /**
   * The run of the thread's first message, open when the asker looked, when that message may have
   * taken its turn as the thread's only message, without asking (activities/turns/take-turn.ts): it
   * is inbound, nothing was sent in the thread yet, and the thread's next message came after its
   * burst window. A keeper that sees the thread's turn free and does not know this run takes it as
   * the holder, and this message waits behind it.
   */
  loneHolder?: { workflowId: string; runId: string; messageId: string };
}

/** Newer messages a turn request names, at most: a burst, not a mailing list. */
export const NEWER_LISTED = 20;

/** Where a message's turn was asked for: a shared keeper (with the thread's key) or, during a hand-over, the thread's own. */
export interface TurnKeeperRef {
  keeperWorkflowId: string;
  /** The thread's key at a shared keeper; null: the per-thread keeper of an older build (workflows/thread.ts). */
  threadKey: string | null;
}

/** What the activity that gives a turn back needs: the keeper, the run, and whether a shared keeper wants to hear. */
export type TurnHandBack = TurnKeeperRef & { runId: string; someoneWaits: boolean };

/**
 * The Update's answer: a turn given at once (`go` or `covered`), or `queued`: a `turn` signal
 * follows. `behind`: the run that holds the thread's turn, which the keeper has not heard from
 * (the asker may look whether it has closed, and ask again saying so).
 */
export type TakeTurnAnswer = TurnGrant | { kind: 'queued'; behind?: { workflowId: string; runId: string } };

/** One thread at a shared keeper: who holds its turn, who waits. */
export interface ThreadTurns {
  inboxId: string;
  threadId: string;
  waiting: ThreadTurnRequest[];
  holder: { workflowId: string; runId: string; messageId: string; covers: string[] } | null;
  /** When the waiting messages' burst window ends and the turn may go (ms since the epoch). */
  readyAtMs?: number;
  /** When the holder is next asked whether it is still open (someone waits behind it), ms since the epoch. */
  checkAtMs?: number;
  /** The wait before that check, doubled each time (a turn behind an approval may be held for days). */
  checkEveryMs?: number;
  /** The holder was told that someone waits (`turnWanted`), so it will say when it is done. */
  holderTold?: boolean;
  /**
   * Newer messages of the thread that a waiting request named (`newer`) and that have not asked yet:
   * the turn waits for them until `expectUntilMs`, so that the newest answers the whole burst.
   */
  expecting?: string[];
  expectUntilMs?: number;
  /**
   * Runs that asked by signal (queueTurn) and still wait: their turn must come by signal, even when
   * an Update gives it (the Update's asker may have stopped waiting for its answer).
   */
  signalled?: string[];
}

export interface TurnKeeperInput {
  /** Which of the TURN_KEEPERS this is. */
  index: number;
  /** Carried over by continue-as-new. */
  state?: TurnKeeperState;
}

export interface TurnKeeperState {
  /** By thread key. A thread with no holder and nobody waiting is not kept. */
  threads: Record<string, ThreadTurns>;
  /** Answers given lately, by run id, so a repeated request (a retried Update) is answered alike. */
  answered: Record<string, TurnGrant>;
  /** Answers to tell again by signal: their run asked by Update, stopped waiting, and asked by signal. */
  retell?: Array<{ threadKey: string; workflowId: string; runId: string; grant: TurnGrant }>;
}

export const takeTurnUpdate = defineUpdate<TakeTurnAnswer, [ThreadTurnRequest]>('takeTurn');
/**
 * The same request when no answer can come at once: a message still inside its burst window always
 * waits, so it is sent by signal-with-start (its local activity returns without waiting for the
 * keeper) and the turn comes by the `turn` signal. So is a request whose Update the keeper did not
 * answer within TURN_UPDATE_WAIT_MS (its worker died, or it is slow): the keeper then tells by signal
 * an answer it may already have given to the Update.
 */
export const queueTurnSignal = defineSignal<[ThreadTurnRequest]>('queueTurn');
/** Sent by the holder when its reply is done, only when its keeper told it that someone waits. */
export const threadTurnDoneSignal = defineSignal<[{ threadKey: string; runId: string }]>('threadTurnDone');
/** Sent by a shared keeper to the run holding a thread's turn when another message of the thread waits. */
export const turnWantedSignal = defineSignal<[]>('turnWanted');
/** One thread's turns at its keeper, or null when nothing of it is kept (nobody holds or waits). */
export const threadTurnsQuery = defineQuery<ThreadTurns | null, [string]>('threadTurns');

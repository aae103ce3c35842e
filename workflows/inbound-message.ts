import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  log,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import type { Activities } from '../activities';
import {
  decisionKey,
  draftKey,
  draftProblem,
  FailureType,
  type InboundMessageInput,
  type InboundMessageResult,
  type MessageRef,
  type OperationKind,
  type OperationReport,
  operationsQuery,
  type OperationView,
  providerDraftKey,
  replyKey,
  type ReplyStatus,
  type ReviewInput,
  reviewKey,
  reviewSignal,
  reviewUpdate,
  SearchAttributes,
  ticketKey,
} from '../contract';

/**
 * One workflow per inbound message (its ID comes from inbox_id + message_id): decide whether a
 * reply is owed, draft it, open a ticket, [wait for a person's approval], send it, label the
 * message. Deterministic: every effect happens in an activity that claims its own operation
 * key, and only IDs and keys pass through here, never bodies or drafted text (history is
 * stored unencrypted; an edited text in a reviewer's payload is the one exception, documented).
 */

/**
 * Only answers that prove a bug or a permanent refusal stop retrying; everything else backs off
 * and retries with the same operation key. Bounded by RETRY_FOR below (each proxy's schedule-to-close).
 */
const retry: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  nonRetryableErrorTypes: Object.values(FailureType),
};

/**
 * How long one step keeps retrying an answer that may pass (AgentMail or Postgres down, a model
 * rate-limiting us) before the message fails visibly (ReplyStatus=failed). Longer than
 * AgentMail's own ~27.5 h of webhook retries and than the send's reconcile-after (~23 h), so an
 * outage of a day heals by itself; past it a person looks, and a replay of the message (the
 * workflow may be started again once failed) resumes it with the same keys, so nothing repeats.
 */
const RETRY_FOR = '2 days';

/**
 * The effects behind operation keys. They heartbeat while they hold their lease, so a crashed
 * worker is noticed after the heartbeat timeout instead of the whole start-to-close timeout,
 * and the retry takes the effect over once the lease has run out.
 */
const effects = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: RETRY_FOR,
  heartbeatTimeout: '10 seconds',
  retry,
});

/** Reads and effects idempotent by nature: quick, no lease. */
const quick = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: RETRY_FOR,
  retry,
});

/**
 * Short steps that need no task queue of their own: the decision (one AgentMail read and one
 * Postgres query, recorded in the operation store) and the labels (set-like). As local
 * activities they run inside the workflow task that asks for them, which saves the Temporal
 * server a task dispatch and a workflow task per step (README, Performance, has the figures).
 * Their results are kept in history as markers, so a replay does not run them again; a worker
 * that crashes mid-step loses its workflow task, and the next worker runs the step again — the
 * operation key makes that a replay of the recorded decision (test/crash-windows). Backoffs
 * longer than the threshold become durable timers.
 */
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: RETRY_FOR,
  localRetryThreshold: '10 seconds',
  retry,
});

/**
 * Giving a budget reservation back on the way out of a failed run. Bounded, so a Postgres outage
 * cannot keep the run from failing; a release that never lands only means fewer replies, not more.
 */
const release = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { ...retry, maximumAttempts: 5 },
});

type DraftVersion = 1 | 2;

export async function inboundMessageWorkflow(input: InboundMessageInput): Promise<InboundMessageResult> {
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const operations = operationsBoard();
  const setStatus = (status: ReplyStatus, more: SearchAttributeUpdatePair[] = []) => {
    upsertSearchAttributes([{ key: SearchAttributes.ReplyStatus, value: status }, ...more]);
    operations.status(status);
    // The wait for a person, in the log a person follows (the other outcome lines: interceptors/outcomes.ts).
    if (status === 'awaiting_approval') log.info("awaiting approval: a reviewer's verdict is needed", { status });
  };
  const review = reviewInbox();
  // Every operation key of this message, derived here once and handed to the activity that runs
  // it. Version 2 is an approver's edit: a changed intent, so new draft, AgentMail draft and reply keys.
  const ofVersion = (version: DraftVersion) => ({
    draft: draftKey(ref, version),
    providerDraft: providerDraftKey(ref, version),
    reply: replyKey(ref, version),
  });
  const keys = {
    decision: decisionKey(ref),
    ticket: ticketKey(ref),
    review: reviewKey(ref),
    versions: { 1: ofVersion(1), 2: ofVersion(2) } satisfies Record<DraftVersion, unknown>,
  };
  // A reply decided on holds a budget reservation until it is sent; one that never reaches the
  // send (rejected, or the run failed before it) gives it back. Once the send has started the
  // reservation stays: the email may have gone out.
  let reserved = false;
  let sendStarted = false;

  try {
    // The ingress starts the run with InboxId, MessageId and ReplyStatus=deciding; a manual
    // start (`temporal workflow start`) carries none, so the run sets them itself. Every upsert
    // costs the server a history event and a visibility write, so none is repeated.
    const started = workflowInfo().typedSearchAttributes;
    if (started.get(SearchAttributes.MessageId) === undefined) {
      setStatus('deciding', [
        { key: SearchAttributes.InboxId, value: ref.inboxId },
        { key: SearchAttributes.MessageId, value: ref.messageId },
      ]);
    }
    const decision = await operations.run(
      keys.decision,
      'decision',
      local.decideReply({ ...ref, key: keys.decision, budgetKey: keys.versions[1].reply }),
      (d) => (d.reply ? 'reply owed' : `skip: ${d.reason}`),
    );
    reserved = decision.reply;
    const thread: SearchAttributeUpdatePair[] =
      started.get(SearchAttributes.ThreadId) === decision.threadId
        ? []
        : [{ key: SearchAttributes.ThreadId, value: decision.threadId }];

    const openTicket = async (note: string, draftKey?: string) =>
      (
        await operations.run(
          keys.ticket,
          'ticket',
          effects.openTicket({
            ...ref,
            key: keys.ticket,
            threadId: decision.threadId,
            note,
            ...(draftKey !== undefined ? { draftKey } : {}),
          }),
          (t) => t.ticketId,
        )
      ).ticketId;

    if (!decision.reply) {
      const ticketId = decision.ticket ? await openTicket(`not answered automatically: ${decision.reason}`) : null;
      setStatus('skipped', [...thread, { key: SearchAttributes.SkipReason, value: decision.reason ?? 'unknown' }]);
      return { status: 'skipped', reason: decision.reason ?? 'unknown', ticketId };
    }

    // The ticket follows the draft, so its note can say how the draft came out (a hand-off's reason
    // and the articles considered, read from the store by the ticket activity). A failed draft
    // still gets its ticket before the failure is raised, for the person who answers instead.
    setStatus('drafting', thread);
    const drafting = operations.run(
      keys.versions[1].draft,
      'draft',
      effects.draftReply({ ...ref, key: keys.versions[1].draft }),
      (d) =>
        [
          `${d.characters} characters`,
          ...(d.citations.length > 0 ? [`cites ${d.citations.join(', ')}`] : []),
          ...(d.handoff ? [`handoff: ${d.handoff.kind}`] : []),
        ].join('; '),
    );
    const approvalNote = 'drafted by the support agent, awaiting approval';
    const ticketing = drafting.then(
      (d) =>
        openTicket(
          d.handoff === null
            ? decision.approval.required
              ? approvalNote
              : 'answered by the support agent'
            : decision.approval.required || d.handoff.route === 'review'
              ? 'handed off by the support agent, awaiting review'
              : 'handed off by the support agent: a person answers',
          keys.versions[1].draft,
        ),
      () => openTicket(decision.approval.required ? approvalNote : 'answered by the support agent'),
    );
    const [drafted, ticketId] = await bothSettled(drafting, ticketing);

    // The agent did not know: with HANDOFF=ticket (in an inbox that needs no approval) the ticket
    // is the answer and no email goes out; otherwise a person reviews the draft like an approval.
    const handoff = drafted.handoff;
    if (handoff !== null && !decision.approval.required && handoff.route === 'ticket') {
      operations.skip(keys.versions[1].reply, 'reply', `handed off: ${handoff.kind}`);
      await local.releaseReplyBudget({ budgetKey: keys.versions[1].reply });
      reserved = false;
      setStatus('handed_off');
      return { status: 'handed_off', ticketId };
    }

    let version: DraftVersion = 1;
    let providerDraftId: string | null = null;
    if (decision.approval.required || handoff !== null) {
      // The reviewer sees the draft at AgentMail; created once per draft version (client_id).
      const showDraft = (v: DraftVersion) =>
        operations.run(
          keys.versions[v].providerDraft,
          'provider-draft',
          effects.createProviderDraft({
            ...ref,
            key: keys.versions[v].providerDraft,
            draftKey: keys.versions[v].draft,
          }),
          (d) => d.draftId,
        );
      const shown = await showDraft(1);

      const verdict = await operations.run(
        keys.review,
        'review',
        (async () =>
          (await quick.recallReview({ key: keys.review })) ??
          (await effects.recordReview({
            ...ref,
            key: keys.review,
            review: await review.wait(
              decision.approval.timeoutMs,
              setStatus,
              handoff !== null ? 'handed_off' : 'awaiting_approval',
            ),
          })))(),
        (v) => `${v.verdict}${v.text !== null ? ' with edits' : ''}${v.reviewer ? ` by ${v.reviewer}` : ''}`,
      );

      if (verdict.verdict === 'reject') {
        operations.skip(keys.versions[1].reply, 'reply', 'rejected by the reviewer');
        await local.releaseReplyBudget({ budgetKey: keys.versions[1].reply });
        reserved = false;
        setStatus('rejected');
        return { status: 'rejected', ticketId };
      }
      providerDraftId = shown.draftId;
      if (verdict.text !== null) {
        // A changed intent: the edited text is the next draft version and goes out under the next reply key.
        version = 2;
        await operations.run(
          keys.versions[version].draft,
          'draft',
          effects.reviseDraft({ ...ref, key: keys.versions[version].draft, reviewKey: keys.review }),
          () => 'edited by the reviewer',
        );
        providerDraftId = (await showDraft(version)).draftId;
      }
    }

    setStatus('sending');
    sendStarted = true;
    const sendInput = { ...ref, draftKey: keys.versions[version].draft, replyKey: keys.versions[version].reply };
    const sent = await operations.run(
      keys.versions[version].reply,
      'reply',
      providerDraftId === null
        ? effects.sendReply(sendInput)
        : effects.sendApprovedDraft({ ...sendInput, draftId: providerDraftId }),
      (s) => `${s.reconciled ? 'reconciled ' : ''}${s.messageId}`,
    );

    await local.labelMessage(ref);
    setStatus('sent');
    return {
      status: 'sent',
      replyMessageId: sent.messageId,
      replyThreadId: sent.threadId,
      ticketId,
      replayed: sent.replayed,
      replyVersion: version,
    };
  } catch (error) {
    if (reserved && !sendStarted) {
      // Even when the run is being cancelled; a failure here must not hide the run's own.
      await CancellationScope.nonCancellable(() =>
        release.releaseReplyBudget({ budgetKey: keys.versions[1].reply }),
      ).catch(() => undefined);
    }
    setStatus('failed');
    operations.failPending(failureSummary(error));
    throw error;
  }
}

/**
 * The `operations` query. Each line is what the activity that ran the operation reported
 * (executed, or replayed from the store), or `pending` while its report is not in; the
 * workflow adds only what no activity can say: that an operation failed, or will not run.
 */
function operationsBoard() {
  const views = new Map<string, OperationView>();
  let replyStatus: ReplyStatus = 'deciding';
  setHandler(operationsQuery, () => [...views.values()]);
  // The same picture on the workflow's page in the Web UI ("current details"), so a person sees
  // where a message stands without running the query: ids, kinds and states only, never content.
  const show = () => setCurrentDetails(currentDetails(replyStatus, [...views.values()]));
  const set = (view: OperationView) => {
    views.set(view.key, view);
    show();
  };
  return {
    status(status: ReplyStatus) {
      replyStatus = status;
      show();
    },
    /** Shows `key` as pending until `activity` reports its operation, then shows that report. */
    async run<R extends { operation: OperationReport }>(
      key: string,
      kind: OperationKind,
      activity: Promise<R>,
      summary: (result: R) => string,
    ): Promise<R> {
      set({ key, kind, status: 'pending' });
      const result = await activity;
      const { operation } = result;
      set({
        key: operation.key,
        kind: operation.kind,
        status: operation.state,
        summary: summary(result),
      });
      return result;
    },
    skip(key: string, kind: OperationKind, summary: string) {
      set({ key, kind, status: 'skipped', summary });
    },
    failPending(summary: string) {
      for (const view of views.values())
        if (view.status === 'pending') views.set(view.key, { ...view, status: 'failed', summary });
      show();
    },
  };
}

/** Markdown for the Web UI: the reply status, then one row per operation (`kind/vN`, its state). */
export function currentDetails(status: ReplyStatus, views: OperationView[]): string {
  const cell = (text: string) => text.replace(/[|\r\n]/g, ' ');
  const rows = views.map((view) => {
    const version = /\/(v\d+)$/.exec(view.key)?.[1] ?? '';
    return `| ${view.kind}/${version} | ${view.status} | ${cell(view.summary ?? '')} |`;
  });
  return [`**ReplyStatus**: ${status}`, '', '| operation | state | |', '|---|---|---|', ...rows].join('\n');
}

/**
 * Receives a reviewer's verdict by Update (answers whether it was accepted) or by Signal (what
 * the Web UI and `temporal workflow signal` send). Handlers are registered from the start so a
 * verdict sent early is kept; only the first verdict counts.
 */
function reviewInbox() {
  let received: ReviewInput | undefined;
  const accept = (input: ReviewInput) => {
    received ??= input;
  };
  setHandler(reviewSignal, (input) => {
    if (reviewProblem(input) === null) accept(input);
    else log.warn('ignored an invalid review signal', { problem: reviewProblem(input) });
  });
  setHandler(
    reviewUpdate,
    (input) => {
      accept(input);
      return { accepted: true as const };
    },
    {
      validator: (input: ReviewInput | undefined) => {
        const problem = reviewProblem(input);
        if (problem !== null)
          throw ApplicationFailure.create({ type: FailureType.InvalidReview, message: problem, nonRetryable: true });
      },
    },
  );
  return {
    /**
     * Waits for a verdict; past the timeout the message is escalated and still waits: it is never
     * sent unapproved. `waiting` is the status meanwhile: awaiting_approval, or handed_off (HANDOFF=review).
     */
    async wait(
      timeoutMs: number,
      setStatus: (status: ReplyStatus) => void,
      waiting: ReplyStatus = 'awaiting_approval',
    ): Promise<ReviewInput> {
      setStatus(waiting);
      if (!(await condition(() => received !== undefined, timeoutMs))) {
        setStatus('escalated');
        log.warn('reply awaiting approval past its timeout: escalated', { timeoutMs });
        await condition(() => received !== undefined);
      }
      return received as ReviewInput;
    },
  };
}

function reviewProblem(input: ReviewInput | undefined): string | null {
  if (!input || (input.verdict !== 'approve' && input.verdict !== 'reject'))
    return 'verdict must be "approve" or "reject"';
  if (input.text !== undefined && input.verdict === 'reject') return 'a rejection carries no text';
  if (input.text !== undefined) {
    if (typeof input.text !== 'string') return 'text, when given, must be a string';
    // The rule the activity applies to the stored edit (contract/draft-text.ts): accepted here, accepted there.
    const problem = draftProblem(input.text);
    if (problem !== null) return `text ${problem}`;
  }
  return null;
}

/** Waits for both; then returns both results, or throws the first failure (in argument order). */
async function bothSettled<A, B>(a: Promise<A>, b: Promise<B>): Promise<[A, B]> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
  return [first.value, second.value];
}

function failureSummary(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure) return `${cause.type ?? 'Error'}: ${cause.message}`;
  return error instanceof Error ? error.message : String(error);
}

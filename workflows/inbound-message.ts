import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  log,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import {
  decisionKey,
  FailureType,
  draftKey,
  draftProblem,
  HOLD_RULES,
  type HoldRule,
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
  notifyKey,
  reviewSignal,
  type ReviewState,
  reviewStateQuery,
  reviewUpdate,
  type ReviewVerdict,
  SearchAttributes,
  threadTicketKey,
  ticketKey,
  ticketNoteKey,
  ticketReplyKey,
} from '../contract';
import { boundedCleanup, leasedEffects, localSteps, quickCalls, reviewerNotifier } from './message/proxies';
import { threadTurn } from './message/turn';

/**
 * One workflow per inbound message (its ID comes from inbox_id + message_id): decide whether a
 * reply is owed, draft it, open a ticket, [wait for a person's approval], send it, label the
 * message. Deterministic: every effect happens in an activity that claims its own operation
 * key, and only IDs and keys pass through here, never bodies or drafted text (history is
 * stored unencrypted; an edited text in a reviewer's payload is the one exception, documented).
 */

type DraftVersion = 1 | 2;

/**
 * Worker Versioning: a message's run finishes on the build it started on, however long it waits
 * for approval, so a new build may change this code freely (docs/changing-the-workflow.md).
 */
setWorkflowOptions({ versioningBehavior: 'PINNED' }, inboundMessageWorkflow);
export async function inboundMessageWorkflow(input: InboundMessageInput): Promise<InboundMessageResult> {
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const operations = operationsBoard();
  const review = reviewInbox();
  const setStatus = (status: ReplyStatus, more: SearchAttributeUpdatePair[] = []) => {
    upsertSearchAttributes([{ key: SearchAttributes.ReplyStatus, value: status }, ...more]);
    operations.status(status);
    review.status(status);
    // The wait for a person, in the log a person follows (the other outcome lines: interceptors/outcomes.ts).
    if (status === 'awaiting_approval' || status === 'held' || status === 'handed_off')
      log.info("awaiting approval: a reviewer's verdict is needed", { status });
  };
  const turn = threadTurn();
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
    ticketNote: ticketNoteKey(ref),
    ticketReply: ticketReplyKey(ref),
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
    // The thread the ingress was told of lets the decision read the message through its thread, a
    // read the turn then takes too (a hint: the decision's threadId is the message's own). Only the
    // local activity's input changes with it, which a replay does not compare.
    const threadHint = started.get(SearchAttributes.ThreadId);
    const decision = await operations.run(
      keys.decision,
      'decision',
      localSteps.decideReply({
        ...ref,
        key: keys.decision,
        budgetKey: keys.versions[1].reply,
        ...(threadHint !== undefined ? { threadHint } : {}),
      }),
      (d) => (d.reply ? 'reply owed' : `skip: ${d.reason}`),
    );
    reserved = decision.reply;
    const thread: SearchAttributeUpdatePair[] =
      started.get(SearchAttributes.ThreadId) === decision.threadId
        ? []
        : [{ key: SearchAttributes.ThreadId, value: decision.threadId }];

    // One ticket per thread (its key from inbox + thread): this message is a comment on it, and
    // a skipped message's reason an internal note.
    const openTicket = async (note: string | null, fold?: { reason: string }) =>
      (
        await operations.run(
          keys.ticket,
          'ticket',
          leasedEffects.openTicket({
            ...ref,
            key: keys.ticket,
            threadId: decision.threadId,
            threadKey: threadTicketKey(ref.inboxId, decision.threadId),
            note,
            noteKey: keys.ticketNote,
            ...(fold ? { fold } : {}),
          }),
          (t) => t.ticketId ?? `counted on the open ticket of ${t.foldedInto ?? 'this inbox'}`,
        )
      ).ticketId;

    if (!decision.reply) {
      // An optional ticket for skipped mail is bounded per inbox (the activity counts it on the open one).
      const fold = decision.foldTicket ? { reason: decision.reason ?? 'unknown' } : undefined;
      const ticketId = decision.ticket
        ? await openTicket(`not answered automatically: ${decision.reason}`, fold)
        : null;
      setStatus('skipped', [...thread, { key: SearchAttributes.SkipReason, value: decision.reason ?? 'unknown' }]);
      return { status: 'skipped', reason: decision.reason ?? 'unknown', ticketId };
    }

    // The ticket does not depend on the draft or the turn: it runs alongside. Each is awaited to
    // its end before a failure of the other is raised, so a message whose draft fails (a refusal,
    // say) still has its ticket for the person who answers it instead.
    // Only a skipped message's ticket is ever folded: an answered one always has the thread's ticket.
    const ticketing = openTicket(null).then((ticketId) => ticketId as string);
    // Awaited below; until then (the turn may take days behind an approval) a final failure of the
    // ticket must not count as an unhandled rejection, which would fail workflow tasks, not the run.
    void ticketing.catch(() => undefined);
    // A thread is answered in order, one message at a time: wait for this message's turn. A newer
    // message of the same sender may take it instead, and once its reply is sent it answers this one too.
    // ThreadId goes with the first status set after the decision (each upsert is a history event).
    let threadPending = thread;
    const withThread = (more: SearchAttributeUpdatePair[] = []) => {
      const pairs = [...threadPending, ...more];
      threadPending = [];
      return pairs;
    };
    const grant = await turn.take({ ...ref, threadId: decision.threadId }, (burstLeftMs) => {
      setStatus('waiting_turn', withThread());
      if (burstLeftMs > 0)
        log.info(`waiting ${Math.ceil(burstLeftMs / 1000)} s for the customer's burst to end (REPLY_COALESCE_MS)`);
    });
    if (grant.kind === 'covered') {
      const [, ticketId] = await bothSettled(
        localSteps.releaseReplyBudget({ budgetKey: keys.versions[1].reply }),
        ticketing,
      );
      reserved = false;
      operations.skip(keys.versions[1].reply, 'reply', `answered together with ${grant.by}`);
      log.info(`answered together: the reply sent to ${grant.by} covers this message`, { coveredBy: grant.by });
      setStatus('answered-together', withThread([{ key: SearchAttributes.CoveredBy, value: grant.by }]));
      return { status: 'answered-together', coveredBy: grant.by, ticketId };
    }
    if (grant.kind === 'person-answering') {
      // A teammate answers this thread: no automatic reply until a person hands it back.
      const [, ticketId] = await bothSettled(
        localSteps.releaseReplyBudget({ budgetKey: keys.versions[1].reply }),
        ticketing,
      );
      reserved = false;
      await operations.run(
        keys.ticketNote,
        'ticket-note',
        leasedEffects.commentDraftNote({
          ...ref,
          key: keys.ticketNote,
          ticketId,
          draftKey: keys.versions[1].draft,
          note: 'not answered automatically: a person of the team answers this thread (hand it back to let the agent answer)',
        }),
        (c) => c.commentId,
      );
      operations.skip(keys.versions[1].reply, 'reply', 'a person answers this thread');
      setStatus('skipped', withThread([{ key: SearchAttributes.SkipReason, value: 'person-answering' }]));
      return { status: 'skipped', reason: 'person-answering', ticketId };
    }
    const covers = grant.covers;

    setStatus('drafting', withThread());
    const drafting = operations.run(
      keys.versions[1].draft,
      'draft',
      leasedEffects.draftReply({ ...ref, key: keys.versions[1].draft }),
      (d) =>
        [
          `${d.characters} characters`,
          ...(d.citations.length > 0 ? [`cites ${d.citations.join(', ')}`] : []),
          ...(d.handoff ? [`handoff: ${d.handoff.kind}`] : []),
        ].join('; '),
    );
    const [drafted, ticketId] = await bothSettled(drafting, ticketing);

    // The agent did not know: the ticket gets an internal note with the reason and the articles
    // considered (read from the store by the activity). With HANDOFF=ticket, in an inbox that needs
    // no approval, that note is the answer and no email goes out; otherwise a person reviews the
    // draft like an approval.
    const handoff = drafted.handoff;
    // The message's one internal note on the thread's ticket, about its draft (a hand-off, a hold).
    const noteOnTicket = (note: string) =>
      operations.run(
        keys.ticketNote,
        'ticket-note',
        leasedEffects.commentDraftNote({
          ...ref,
          key: keys.ticketNote,
          ticketId,
          draftKey: keys.versions[1].draft,
          note,
        }),
        (c) => c.commentId,
      );
    if (handoff !== null) {
      await noteOnTicket(
        decision.approval.required || handoff.route === 'review'
          ? 'handed off by the support agent, awaiting review'
          : 'handed off by the support agent: a person answers',
      );
    }
    if (handoff !== null && !decision.approval.required && handoff.route === 'ticket') {
      operations.skip(keys.versions[1].reply, 'reply', `handed off: ${handoff.kind}`);
      await localSteps.releaseReplyBudget({ budgetKey: keys.versions[1].reply });
      reserved = false;
      await turn.release();
      setStatus('handed_off');
      return { status: 'handed_off', ticketId, covers };
    }

    let version: DraftVersion = 1;
    // A person decides when the inbox requires it, or when the drafted text tripped a rule
    // (activities/draft/draft-check.ts): then it is held, never sent unless a person approves.
    const holds: HoldRule[] = drafted.holds;
    if (decision.approval.required || handoff !== null || holds.length > 0) {
      // The reviewer sees the draft at AgentMail (and in the operation store, by its key).
      await operations.run(
        keys.versions[1].providerDraft,
        'provider-draft',
        leasedEffects.createProviderDraft({
          ...ref,
          key: keys.versions[1].providerDraft,
          draftKey: keys.versions[1].draft,
        }),
        (d) => d.draftId,
      );
      const reason =
        handoff !== null
          ? `handoff: ${handoff.kind}`
          : holds.length > 0
            ? `held: ${holds.map((rule) => HOLD_RULES[rule]).join('; ')}`
            : 'approval required';
      // Held: an inbox that needs no approval, a draft that tripped a rule (a hand-off says so itself).
      const held = !decision.approval.required && handoff === null;
      const waiting = handoff !== null ? 'handed_off' : held ? 'held' : 'awaiting_approval';
      // One notification when the reply starts waiting and one when it is escalated, each under its
      // own key; started, not awaited: a dead webhook never holds up a verdict.
      const notify = (status: ReplyStatus) => {
        const event =
          status === 'awaiting_approval' || status === 'held' || status === 'handed_off'
            ? 'waiting'
            : status === 'escalated'
              ? 'escalated'
              : null;
        if (event === null) return;
        reviewerNotifier
          .notifyReviewers({ ...ref, key: notifyKey(ref, event), event, reason, draftKey: keys.versions[1].draft })
          .catch((error: unknown) =>
            log.warn('reviewers were not notified', { event, failure: failureSummary(error) }),
          );
      };
      // A verdict recorded by an earlier run of this message (a replay) stands; otherwise the window
      // opens now, before the status tells a person to judge, so a verdict sent on seeing it is not refused.
      const recalled = await quickCalls.recallReview({ key: keys.review });
      if (recalled === null) {
        review.open({ revision: 1, draftKey: keys.versions[1].draft, reason });
        if (held) {
          setStatus('held', [{ key: SearchAttributes.SkipReason, value: `held-${holds.join('-')}` }]);
          await noteOnTicket(`a drafted reply is held for a person to approve or reject (${reason})`);
          notify('held');
        }
      }
      const verdict = await operations.run(
        keys.review,
        'review',
        recalled !== null
          ? Promise.resolve(recalled)
          : (async () =>
              leasedEffects.recordReview({
                ...ref,
                key: keys.review,
                review: await review.wait(waiting, held ? null : decision.approval.timeoutMs, (status) => {
                  setStatus(status);
                  notify(status);
                }),
              }))(),
        (v) => `${v.verdict}${v.text !== null ? ' with edits' : ''}${v.reviewer ? ` by ${v.reviewer}` : ''}`,
      );
      review.stands({ verdict: verdict.verdict, revision: verdict.revision ?? 1, reviewer: verdict.reviewer ?? '' });
      // A verdict stands: AgentMail's copy of the draft goes, so nobody can send it from the console.
      // What goes out is our stored text of the approved version.
      await quickCalls.deleteProviderDraft({ inboxId: ref.inboxId, providerDraftKey: keys.versions[1].providerDraft });

      if (verdict.verdict === 'reject') {
        operations.skip(keys.versions[1].reply, 'reply', 'rejected by the reviewer');
        await localSteps.releaseReplyBudget({ budgetKey: keys.versions[1].reply });
        reserved = false;
        await turn.release();
        setStatus('rejected');
        return { status: 'rejected', ticketId, covers };
      }
      if (verdict.text !== null) {
        // A changed intent: the edited text is the next draft version and goes out under the next reply key.
        version = 2;
        await operations.run(
          keys.versions[version].draft,
          'draft',
          leasedEffects.reviseDraft({ ...ref, key: keys.versions[version].draft, reviewKey: keys.review }),
          () => 'edited by the reviewer',
        );
      }
    }

    setStatus('sending');
    sendStarted = true;
    const sent = await operations.run(
      keys.versions[version].reply,
      'reply',
      leasedEffects.sendReply({
        ...ref,
        draftKey: keys.versions[version].draft,
        replyKey: keys.versions[version].reply,
      }),
      (s) => `${s.reconciled ? 'reconciled ' : ''}${s.messageId}`,
    );

    await operations.run(
      keys.ticketReply,
      'ticket-reply',
      localSteps.finishReply({
        ...ref,
        key: keys.ticketReply,
        ticketId,
        draftKey: keys.versions[version].draft,
        replyMessageId: sent.messageId,
        covers,
        ...turn.handBack(true),
      }),
      (c) => c.commentId,
    );
    setStatus('sent');
    return {
      status: 'sent',
      replyMessageId: sent.messageId,
      replyThreadId: sent.threadId,
      ticketId,
      replayed: sent.replayed,
      replyVersion: version,
      covers,
    };
  } catch (error) {
    if (reserved && !sendStarted) {
      // Even when the run is being cancelled; a failure here must not hide the run's own.
      await CancellationScope.nonCancellable(() =>
        boundedCleanup.releaseReplyBudget({ budgetKey: keys.versions[1].reply }),
      ).catch(() => undefined);
    }
    // The thread's next message must not wait on a run that failed.
    await CancellationScope.nonCancellable(() => turn.release({ bounded: true })).catch(() => undefined);
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
 * the Web UI and `temporal workflow signal` send). A verdict is accepted only while one is
 * awaited, for the revision awaiting it, and only once; never kept for later. The Update's
 * validator refuses anything else (`ReviewRefused`, naming the current ReplyStatus or the verdict
 * that stands), so a refused Update leaves no trace in history; a refused Signal is logged and
 * dropped. The `reviewState` query shows what a reviewer needs: ids and reasons, never text.
 */
function reviewInbox() {
  let status: ReplyStatus = 'deciding';
  let awaiting: { revision: number; draftKey: string; reason: string } | null = null;
  let received: ReviewInput | undefined;
  let standing: ReviewVerdict | null = null;

  /** Why this (well-formed) verdict cannot be accepted now, or null when it can. */
  const refusal = (input: ReviewInput): string | null => {
    if (standing !== null)
      return `a verdict stands: ${standing.verdict} of revision ${standing.revision} by ${standing.reviewer} (ReplyStatus=${status})`;
    if (awaiting === null) return `no verdict is awaited: ReplyStatus=${status}`;
    if (input.revision !== awaiting.revision)
      return `revision ${input.revision} is not the one awaiting a verdict (revision ${awaiting.revision}, ReplyStatus=${status})`;
    return null;
  };
  const accept = (input: ReviewInput) => {
    received = input;
    standing = { verdict: input.verdict, revision: input.revision, reviewer: input.reviewer };
    awaiting = null;
  };
  setHandler(reviewSignal, (input) => {
    const problem = reviewProblem(input) ?? refusal(input);
    if (problem === null) accept(input);
    else log.warn('dropped a review signal', { problem });
  });
  setHandler(
    reviewUpdate,
    (input) => {
      // The validator ran in this same activation; nothing can have changed since. Checked anyway.
      const problem = refusal(input);
      if (problem !== null)
        throw ApplicationFailure.create({ type: FailureType.ReviewRefused, message: problem, nonRetryable: true });
      accept(input);
      return { accepted: true as const, revision: input.revision };
    },
    {
      validator: (input: ReviewInput | undefined) => {
        const problem = reviewProblem(input);
        if (problem !== null)
          throw ApplicationFailure.create({ type: FailureType.InvalidReview, message: problem, nonRetryable: true });
        const refused = refusal(input as ReviewInput);
        if (refused !== null)
          throw ApplicationFailure.create({ type: FailureType.ReviewRefused, message: refused, nonRetryable: true });
      },
    },
  );
  setHandler(reviewStateQuery, (): ReviewState => ({
    status,
    revision: awaiting?.revision ?? null,
    draftKey: awaiting?.draftKey ?? null,
    reason: awaiting?.reason ?? null,
    verdict: standing,
  }));
  return {
    status(next: ReplyStatus) {
      status = next;
    },
    /** The verdict of this message, also when it was recalled from the store (a replay). */
    stands(verdict: ReviewVerdict) {
      standing ??= verdict;
      awaiting = null;
    },
    /** Opens the window for a verdict on this revision of the draft (it exists at AgentMail and in the store). */
    open(shown: { revision: number; draftKey: string; reason: string }) {
      if (standing === null) awaiting = shown;
    },
    /**
     * Waits for a verdict on the open revision. Past `escalateAfterMs` (an approval inbox's
     * timeout) the message is escalated and still waits: it is never sent unapproved.
     */
    async wait(
      waiting: 'awaiting_approval' | 'held' | 'handed_off',
      escalateAfterMs: number | null,
      setStatus: (status: ReplyStatus) => void,
    ): Promise<ReviewInput> {
      if (received === undefined && status !== waiting) setStatus(waiting);
      if (escalateAfterMs !== null && !(await condition(() => received !== undefined, escalateAfterMs))) {
        setStatus('escalated');
        log.warn('reply awaiting approval past its timeout: escalated', { timeoutMs: escalateAfterMs });
      }
      await condition(() => received !== undefined);
      return received as ReviewInput;
    },
  };
}

function reviewProblem(input: ReviewInput | undefined): string | null {
  if (!input || (input.verdict !== 'approve' && input.verdict !== 'reject'))
    return 'verdict must be "approve" or "reject"';
  if (typeof input.revision !== 'number' || !Number.isInteger(input.revision) || input.revision < 1)
    return 'revision must be the draft revision judged (a positive integer, from reviewState)';
  if (typeof input.reviewer !== 'string' || input.reviewer.trim() === '' || input.reviewer.length > 200)
    return 'reviewer must name who judged (1 to 200 characters)';
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

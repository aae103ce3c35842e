import { ActivityFailure, ApplicationFailure, CancellationScope, log } from '@temporalio/workflow';
import {
  FailureType,
  HOLD_RULES,
  OperationKind,
  type InboundMessageResult,
  notifyKey,
  type ReplyStatus,
  SearchAttributes,
  threadTicketKey,
} from '../../contract';
import type { Activities } from '../../activities';
import { acknowledgments, boundedCleanup, leasedEffects, localSteps, quickCalls, reviewerNotifier } from './proxies';
import { bothSettled, type DraftVersion, failureSummary, type MessageRun } from './run';

/** The steps of one message's run, in the order inboundMessageWorkflow takes them. */

type Decision = Awaited<ReturnType<Activities['decideReply']>>;
type Drafted = Awaited<ReturnType<Activities['draftReply']>>;

/** Whether a reply is owed (one AgentMail read and one Postgres query, recorded in the operation store). */
export async function decide(run: MessageRun): Promise<Decision> {
  const { ref, keys, started } = run;
  // The ingress starts the run with InboxId, MessageId and ReplyStatus=deciding; a manual start
  // (`temporal workflow start`) carries none, so the run sets them itself. Every upsert costs the
  // server a history event and a visibility write, so none is repeated.
  if (started.get(SearchAttributes.MessageId) === undefined) {
    run.setStatus('deciding', [
      { key: SearchAttributes.InboxId, value: ref.inboxId },
      { key: SearchAttributes.MessageId, value: ref.messageId },
    ]);
  }
  // The thread the ingress was told of lets the decision read the message through its thread, a read
  // the turn then takes too (a hint: the decision's threadId is the message's own).
  const threadHint = started.get(SearchAttributes.ThreadId);
  const decision = await run.operations.run(
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
  run.budget.reserved = decision.reply;
  run.setThreadWithNextStatus(decision.threadId);
  return decision;
}

/** The thread's one ticket (its key from inbox + thread): this message is a comment on it, a skip's reason a note. */
export async function openThreadTicket(
  run: MessageRun,
  decision: Decision,
  note: string | null,
  fold?: { reason: string },
): Promise<string | null> {
  const { ref, keys } = run;
  const opened = await run.operations.run(
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
  );
  return opened.ticketId;
}

/** No reply is owed: the skip is recorded, with a ticket for a person when the inbox wants one (bounded per inbox). */
export async function skipMessage(run: MessageRun, decision: Decision): Promise<InboundMessageResult> {
  const reason = decision.reason ?? 'unknown';
  const fold = decision.foldTicket ? { reason } : undefined;
  const ticketId = decision.ticket
    ? await openThreadTicket(run, decision, `not answered automatically: ${reason}`, fold)
    : null;
  run.setStatus('skipped', [{ key: SearchAttributes.SkipReason, value: reason }]);
  return { status: 'skipped', reason, ticketId };
}

/**
 * The run ends without a reply of its own before drafting (covered by a sent reply, or a person answers
 * the thread): the budget reservation goes back, and the ticket (opened alongside) is awaited.
 */
export async function endWithoutReply(run: MessageRun, ticketing: Promise<string>, why: string): Promise<string> {
  const [, ticketId] = await bothSettled(
    localSteps.releaseReplyBudget({ budgetKey: run.keys.versions[1].reply }),
    ticketing,
  );
  run.budget.reserved = false;
  run.operations.skip(run.keys.versions[1].reply, 'reply', why);
  return ticketId;
}

/** Covered by a reply that was sent (its draft read this message): answered together, and which reply says so. */
export async function answeredTogether(
  run: MessageRun,
  ticketing: Promise<string>,
  by: string,
): Promise<InboundMessageResult> {
  const ticketId = await endWithoutReply(run, ticketing, `answered together with ${by}`);
  log.info(`answered together: the reply sent to ${by} covers this message`, { coveredBy: by });
  run.setStatus('answered-together', [{ key: SearchAttributes.CoveredBy, value: by }]);
  return { status: 'answered-together', coveredBy: by, ticketId };
}

/** A person of the team answers this thread: no automatic reply until a person hands it back. */
export async function leaveToPerson(run: MessageRun, ticketing: Promise<string>): Promise<InboundMessageResult> {
  const ticketId = await endWithoutReply(run, ticketing, 'a person answers this thread');
  await noteOnTicket(
    run,
    ticketId,
    'not answered automatically: a person of the team answers this thread (hand it back to let the agent answer)',
  );
  run.setStatus('skipped', [{ key: SearchAttributes.SkipReason, value: 'person-answering' }]);
  return { status: 'skipped', reason: 'person-answering', ticketId };
}

/** The reply's draft (text stored under its key, never in history), with the ticket awaited beside it. */
export async function draft(run: MessageRun, ticketing: Promise<string>): Promise<[Drafted, string]> {
  run.setStatus('drafting');
  const drafting = run.operations.run(
    run.keys.versions[1].draft,
    'draft',
    leasedEffects.draftReply({ ...run.ref, key: run.keys.versions[1].draft }),
    (d) =>
      [
        `${d.characters} characters`,
        ...(d.citations.length > 0 ? [`cites ${d.citations.join(', ')}`] : []),
        ...(d.handoff ? [`handoff: ${d.handoff.kind}`] : []),
      ].join('; '),
  );
  const [drafted, ticketId] = await bothSettled(drafting, ticketing);
  run.setLanguageWithNextStatus(drafted.language);
  return [drafted, ticketId];
}

/**
 * A person must answer (a hand-off, a held draft, an approval inbox): the customer may get one short
 * word that a person will answer and by when (HANDOFF_ACKNOWLEDGMENT, BUSINESS_HOURS; the activity
 * sends nothing where it is not configured). One per burst: the holder's key. Started, not awaited
 * here, and never a failure of the run: the caller awaits it before the reply goes out or the run ends.
 */
export function acknowledge(run: MessageRun, occasion: 'handoff' | 'held' | 'approval'): Promise<void> {
  const { ref, keys } = run;
  return acknowledgments
    .sendAcknowledgment({ ...ref, key: keys.acknowledgment, occasion, draftKey: keys.versions[1].draft })
    .then(
      async (outcome) => {
        if (outcome.sent)
          await run.operations.run(
            keys.acknowledgment,
            OperationKind.acknowledgment,
            // Sent like a reply (the store's row is of kind reply); shown as what it is.
            Promise.resolve({ ...outcome, operation: { ...outcome.operation, kind: OperationKind.acknowledgment } }),
            (sent) => `sent ${sent.messageId}`,
          );
        // Not configured for this inbox or occasion: nothing to show (most inboxes).
        else if (outcome.reason !== 'not-configured')
          run.operations.skip(keys.acknowledgment, OperationKind.acknowledgment, `not sent: ${outcome.reason}`);
      },
      (error: unknown) => log.warn('the acknowledgment was not sent', { occasion, failure: failureSummary(error) }),
    );
}

/** The message's one internal note on the thread's ticket (a hand-off, a hold, a person answering). */
export function noteOnTicket(run: MessageRun, ticketId: string, note: string) {
  return run.operations.run(
    run.keys.ticketNote,
    'ticket-note',
    leasedEffects.commentDraftNote({
      ...run.ref,
      key: run.keys.ticketNote,
      ticketId,
      draftKey: run.keys.versions[1].draft,
      note,
    }),
    (c) => c.commentId,
  );
}

/** A reply that ends unsent before the send (handed off, rejected): budget back, turn back, the status. */
async function endUnsent(run: MessageRun, status: 'handed_off' | 'rejected', why: string) {
  run.operations.skip(run.keys.versions[1].reply, 'reply', why);
  await localSteps.releaseReplyBudget({ budgetKey: run.keys.versions[1].reply });
  run.budget.reserved = false;
  await run.turn.release();
  run.setStatus(status);
}

/** HANDOFF=ticket in an inbox that needs no approval: the note is the answer, no email goes out. */
export async function handOffToTicket(run: MessageRun, drafted: Drafted): Promise<void> {
  await endUnsent(run, 'handed_off', `handed off: ${drafted.handoff?.kind ?? 'unknown'}`);
}

/**
 * A person decides (the inbox requires it, the draft handed off, or it tripped a rule): the draft is
 * shown at AgentMail, reviewers are told, and the run waits for the verdict. Returns the version to
 * send, or null when the reviewer rejected it (the ticket then has a note of the rejection).
 */
export async function awaitVerdict(
  run: MessageRun,
  decision: Decision,
  drafted: Drafted,
  ticketId: string,
): Promise<DraftVersion | null> {
  const { ref, keys, review } = run;
  const { handoff, holds } = drafted;
  // The reviewer sees the draft at AgentMail (and in the operation store, by its key).
  await run.operations.run(
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
  // One notification when the reply starts waiting and one when it is escalated, each under its own
  // key; started, not awaited: a dead webhook never holds up a verdict.
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
      .catch((error: unknown) => log.warn('reviewers were not notified', { event, failure: failureSummary(error) }));
  };
  // A verdict recorded by an earlier run of this message (a replay) stands; otherwise the window opens
  // now, before the status tells a person to judge, so a verdict sent on seeing it is not refused.
  const recalled = await quickCalls.recallReview({ key: keys.review });
  if (recalled === null) {
    review.open({ revision: 1, draftKey: keys.versions[1].draft, reason });
    if (held) {
      run.setStatus('held', [{ key: SearchAttributes.SkipReason, value: `held-${holds.join('-')}` }]);
      await noteOnTicket(run, ticketId, `a drafted reply is held for a person to approve or reject (${reason})`);
      notify('held');
    }
  }
  const verdict = await run.operations.run(
    keys.review,
    'review',
    recalled !== null
      ? Promise.resolve(recalled)
      : (async () =>
          leasedEffects.recordReview({
            ...ref,
            key: keys.review,
            review: await review.wait(waiting, held ? null : decision.approval.timeoutMs, (status) => {
              run.setStatus(status);
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
    // The team sees why nothing went out, on the thread's ticket (its own key: the hold may have noted already).
    await run.operations.run(
      keys.rejectionNote,
      'ticket-note',
      leasedEffects.commentDraftNote({
        ...ref,
        key: keys.rejectionNote,
        ticketId,
        draftKey: keys.versions[1].draft,
        note: `the drafted reply was rejected${verdict.reviewer ? ` by ${verdict.reviewer}` : ''}: nothing was sent, a person answers`,
      }),
      (c) => c.commentId,
    );
    await endUnsent(run, 'rejected', 'rejected by the reviewer');
    return null;
  }
  if (verdict.text === null) return 1;
  // A changed intent: the edited text is the next draft version and goes out under the next reply key.
  await run.operations.run(
    keys.versions[2].draft,
    'draft',
    leasedEffects.reviseDraft({ ...ref, key: keys.versions[2].draft, reviewKey: keys.review }),
    () => 'edited by the reviewer',
  );
  return 2;
}

/** The send (Idempotency-Key from the reply key), then one local activity: the turn back, the label, the ticket comment. */
export async function sendReply(
  run: MessageRun,
  version: DraftVersion,
  ticketId: string,
  covers: string[],
): Promise<InboundMessageResult> {
  const { ref, keys } = run;
  run.setStatus('sending');
  run.budget.sendStarted = true;
  const sent = await run.operations.run(
    keys.versions[version].reply,
    'reply',
    leasedEffects.sendReply({ ...ref, draftKey: keys.versions[version].draft, replyKey: keys.versions[version].reply }),
    (s) => `${s.reconciled ? 'reconciled ' : ''}${s.messageId}`,
  );
  await run.operations.run(
    keys.ticketReply,
    'ticket-reply',
    localSteps.finishReply({
      ...ref,
      key: keys.ticketReply,
      ticketId,
      draftKey: keys.versions[version].draft,
      replyMessageId: sent.messageId,
      covers,
      ...run.turn.handBack(true),
    }),
    (c) => c.commentId,
  );
  run.setStatus('sent');
  return {
    status: 'sent',
    replyMessageId: sent.messageId,
    replyThreadId: sent.threadId,
    ticketId,
    replayed: sent.replayed,
    replyVersion: version,
    covers,
  };
}

/** On the way out of a failure (also when cancelled): the budget back unless the send started, the turn back, the status. */
export async function failRun(run: MessageRun, error: unknown): Promise<void> {
  if (run.budget.reserved && !run.budget.sendStarted) {
    // A failure here must not hide the run's own.
    await CancellationScope.nonCancellable(() =>
      boundedCleanup.releaseReplyBudget({ budgetKey: run.keys.versions[1].reply }),
    ).catch(() => undefined);
  }
  // The thread's next message must not wait on a run that failed.
  await CancellationScope.nonCancellable(() => run.turn.release({ bounded: true })).catch(() => undefined);
  run.setStatus('failed');
  run.operations.failPending(failureSummary(error));
}

/**
 * The customer was forgotten (privacy/erase.ts) while this run was under way, or before a rerun: an
 * activity answered `Erased`. Nothing more happens for this message — no draft, no ticket, no send —
 * but the run's own bookkeeping (the budget it reserved, the thread's turn) is given back like any
 * ending, and the run ends `erased`, not failed: it is the outcome the operator asked for.
 */
export async function endErased(run: MessageRun): Promise<InboundMessageResult> {
  if (run.budget.reserved && !run.budget.sendStarted) {
    await CancellationScope.nonCancellable(() =>
      boundedCleanup.releaseReplyBudget({ budgetKey: run.keys.versions[1].reply }),
    ).catch(() => undefined);
  }
  await CancellationScope.nonCancellable(() => run.turn.release({ bounded: true })).catch(() => undefined);
  run.setStatus('erased');
  run.operations.failPending("erased on the customer's request");
  return { status: 'erased' };
}

/** Whether a failure is an activity's `Erased` answer (the operation store's tombstone). */
export function isErased(error: unknown): boolean {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type === FailureType.Erased;
}

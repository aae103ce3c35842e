import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  log,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { SearchAttributeUpdatePair } from '@temporalio/common';
import type { Activities } from '../activities';
import { decisionKey, draftKey, providerDraftKey, replyKey, reviewKey, ticketKey, type MessageRef } from '../lib/keys';
import {
  FailureType,
  SearchAttributes,
  operationsQuery,
  reviewSignal,
  reviewUpdate,
  type InboundMessageInput,
  type InboundMessageResult,
  type OperationView,
  type ReplyStatus,
  type ReviewInput,
} from './shared';

/**
 * One workflow per inbound message (its ID comes from inbox_id + message_id): decide whether a
 * reply is owed, draft it, open a ticket, [wait for a person's approval], send it, label the
 * message. Deterministic: every effect happens in an activity that claims its own operation
 * key, and only IDs and keys pass through here, never bodies or drafted text (history is
 * stored unencrypted; an edited text in a reviewer's payload is the one exception, documented).
 */

/** Only answers that prove a bug or a permanent refusal stop retrying; everything else backs off and retries. */
const retry: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  nonRetryableErrorTypes: Object.values(FailureType),
};

/**
 * The effects behind operation keys. They heartbeat while they hold their lease, so a crashed
 * worker is noticed after the heartbeat timeout instead of the whole start-to-close timeout,
 * and the retry takes the effect over once the lease has run out.
 */
const effects = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '10 seconds',
  retry,
});

/** Reads and effects idempotent by nature: quick, no lease. */
const quick = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
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

export async function inboundMessageWorkflow(input: InboundMessageInput): Promise<InboundMessageResult> {
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const operations = new Map<string, OperationView>();
  const track = (view: OperationView) => operations.set(view.key, view);
  setHandler(operationsQuery, () => [...operations.values()]);
  const setStatus = (status: ReplyStatus, more: SearchAttributeUpdatePair[] = []) =>
    upsertSearchAttributes([{ key: SearchAttributes.ReplyStatus, value: status }, ...more]);
  const review = reviewInbox();
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
    track({ key: decisionKey(ref), kind: 'decision', status: 'pending' });
    const decision = await local.decideReply(ref);
    reserved = decision.reply;
    const thread: SearchAttributeUpdatePair[] =
      started.get(SearchAttributes.ThreadId) === decision.threadId
        ? []
        : [{ key: SearchAttributes.ThreadId, value: decision.threadId }];
    track({
      key: decisionKey(ref),
      kind: 'decision',
      status: 'complete',
      summary: decision.reply ? 'reply owed' : `skip: ${decision.reason}`,
    });

    const openTicket = async (note: string) => {
      track({ key: ticketKey(ref), kind: 'ticket', status: 'pending' });
      const ticket = await effects.openTicket({ ...ref, threadId: decision.threadId, note });
      track({
        key: ticketKey(ref),
        kind: 'ticket',
        status: ticket.replayed ? 'replayed' : 'complete',
        summary: ticket.ticketId,
      });
      return ticket.ticketId;
    };

    if (!decision.reply) {
      const ticketId = decision.ticket ? await openTicket(`not answered automatically: ${decision.reason}`) : null;
      setStatus('skipped', [...thread, { key: SearchAttributes.SkipReason, value: decision.reason ?? 'unknown' }]);
      return { status: 'skipped', reason: decision.reason ?? 'unknown', ticketId };
    }

    // The ticket does not depend on the draft: both run at once. Each is awaited to its end
    // before a failure of the other is raised, so a message whose draft fails (a refusal, say)
    // still has its ticket for the person who answers it instead.
    setStatus('drafting', thread);
    track({ key: draftKey(ref), kind: 'draft', status: 'pending' });
    const drafting = effects.draftReply(ref).then((draft) => {
      track({
        key: draft.draftKey,
        kind: 'draft',
        status: draft.replayed ? 'replayed' : 'complete',
        summary: `${draft.characters} characters`,
      });
      return draft;
    });
    const ticketing = openTicket(
      decision.approval.required ? 'drafted by the support agent, awaiting approval' : 'answered by the support agent',
    );
    const [, ticketId] = await bothSettled(drafting, ticketing);

    let version = 1;
    let providerDraftId: string | null = null;
    if (decision.approval.required) {
      // The reviewer sees the draft at AgentMail; created once per draft version (client_id).
      track({ key: providerDraftKey(ref), kind: 'provider-draft', status: 'pending' });
      const shown = await effects.createProviderDraft({ ...ref, version: 1 });
      track({ key: providerDraftKey(ref), kind: 'provider-draft', status: 'complete', summary: shown.draftId });

      track({ key: reviewKey(ref), kind: 'review', status: 'pending' });
      const verdict =
        (await quick.recallReview(ref)) ??
        (await effects.recordReview({ ...ref, review: await review.wait(decision.approval.timeoutMs, setStatus) }));
      track({
        key: reviewKey(ref),
        kind: 'review',
        status: 'complete',
        summary: `${verdict.verdict}${verdict.text !== null ? ' with edits' : ''}${verdict.reviewer ? ` by ${verdict.reviewer}` : ''}`,
      });

      if (verdict.verdict === 'reject') {
        track({ key: replyKey(ref), kind: 'reply', status: 'skipped', summary: 'rejected by the reviewer' });
        await local.releaseReplyBudget(ref);
        reserved = false;
        setStatus('rejected');
        return { status: 'rejected', ticketId };
      }
      providerDraftId = shown.draftId;
      if (verdict.text !== null) {
        // A changed intent: the edited text is the next draft version and goes out under the next reply key.
        version = 2;
        const revised = await effects.reviseDraft({ ...ref, version });
        track({ key: revised.draftKey, kind: 'draft', status: 'complete', summary: 'edited by the reviewer' });
        providerDraftId = (await effects.createProviderDraft({ ...ref, version })).draftId;
      }
    }

    setStatus('sending');
    sendStarted = true;
    const key = replyKey(ref, version);
    track({ key, kind: 'reply', status: 'pending' });
    const sendInput = { ...ref, draftKey: draftKey(ref, version), replyKey: key };
    const sent =
      providerDraftId === null
        ? await effects.sendReply(sendInput)
        : await effects.sendApprovedDraft({ ...sendInput, draftId: providerDraftId });
    track({
      key,
      kind: 'reply',
      status: sent.replayed ? 'replayed' : 'complete',
      summary: `${sent.reconciled ? 'reconciled ' : ''}${sent.messageId}`,
    });

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
      await CancellationScope.nonCancellable(() => release.releaseReplyBudget(ref)).catch(() => undefined);
    }
    setStatus('failed');
    for (const view of operations.values()) {
      if (view.status === 'pending') track({ ...view, status: 'failed', summary: failureSummary(error) });
    }
    throw error;
  }
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
    /** Waits for a verdict; past the timeout the message is escalated and still waits: it is never sent unapproved. */
    async wait(timeoutMs: number, setStatus: (status: ReplyStatus) => void): Promise<ReviewInput> {
      setStatus('awaiting_approval');
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
  if (input.text !== undefined && (typeof input.text !== 'string' || input.text.trim() === ''))
    return 'text, when given, must be non-empty';
  if (input.text !== undefined && input.verdict === 'reject') return 'a rejection carries no text';
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

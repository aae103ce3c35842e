import { ActivityFailure, ApplicationFailure, proxyActivities, setHandler, upsertSearchAttributes, type RetryPolicy } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { draftKey, replyKey, ticketKey, decisionKey } from '../lib/keys';
import {
  FailureType,
  SearchAttributes,
  operationsQuery,
  type InboundMessageInput,
  type InboundMessageResult,
  type OperationView,
  type ReplyStatus,
} from './shared';

/**
 * One workflow per inbound message (its ID comes from inbox_id + message_id): decide whether a
 * reply is owed, draft it, open a ticket, send it, label the message. Deterministic: every
 * effect happens in an activity that claims its own operation key, and only IDs and keys pass
 * through here, never bodies or drafted text (history is stored unencrypted).
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
const { decideReply, draftReply, openTicket, sendReply } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '10 seconds',
  retry,
});

/** Labels are idempotent by nature and quick. */
const { labelMessage } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry,
});

export async function inboundMessageWorkflow(input: InboundMessageInput): Promise<InboundMessageResult> {
  const ref = { inboxId: input.inboxId, messageId: input.messageId };
  const operations = new Map<string, OperationView>();
  const track = (view: OperationView) => operations.set(view.key, view);
  setHandler(operationsQuery, () => [...operations.values()]);

  const setStatus = (status: ReplyStatus) => upsertSearchAttributes([{ key: SearchAttributes.ReplyStatus, value: status }]);

  try {
    setStatus('deciding');
    track({ key: decisionKey(ref), kind: 'decision', status: 'pending' });
    const decision = await decideReply(ref);
    upsertSearchAttributes([{ key: SearchAttributes.ThreadId, value: decision.threadId }]);
    track({ key: decisionKey(ref), kind: 'decision', status: 'complete', summary: decision.reply ? 'reply owed' : `skip: ${decision.reason}` });

    if (!decision.reply) {
      track({ key: draftKey(ref), kind: 'draft', status: 'skipped' });
      track({ key: replyKey(ref), kind: 'reply', status: 'skipped' });
      let ticketId: string | null = null;
      if (decision.ticket) {
        const ticket = await openTicket({ ...ref, threadId: decision.threadId, note: `not answered automatically: ${decision.reason}` });
        track({ key: ticketKey(ref), kind: 'ticket', status: ticket.replayed ? 'replayed' : 'complete', summary: ticket.ticketId });
        ticketId = ticket.ticketId;
      }
      setStatus('skipped');
      return { status: 'skipped', reason: decision.reason ?? 'unknown', ticketId };
    }

    setStatus('drafting');
    track({ key: draftKey(ref), kind: 'draft', status: 'pending' });
    const draft = await draftReply(ref);
    track({ key: draft.draftKey, kind: 'draft', status: draft.replayed ? 'replayed' : 'complete', summary: `${draft.characters} characters` });

    track({ key: ticketKey(ref), kind: 'ticket', status: 'pending' });
    const ticket = await openTicket({ ...ref, threadId: decision.threadId, note: 'answered by the support agent' });
    track({ key: ticketKey(ref), kind: 'ticket', status: ticket.replayed ? 'replayed' : 'complete', summary: ticket.ticketId });

    setStatus('sending');
    const key = replyKey(ref);
    track({ key, kind: 'reply', status: 'pending' });
    const sent = await sendReply({ ...ref, draftKey: draft.draftKey, replyKey: key });
    track({ key, kind: 'reply', status: sent.replayed ? 'replayed' : 'complete', summary: `${sent.reconciled ? 'reconciled ' : ''}${sent.messageId}` });

    await labelMessage(ref);
    setStatus('sent');
    return { status: 'sent', replyMessageId: sent.messageId, replyThreadId: sent.threadId, ticketId: ticket.ticketId, replayed: sent.replayed };
  } catch (error) {
    setStatus('failed');
    for (const view of operations.values()) {
      if (view.status === 'pending') track({ ...view, status: 'failed', summary: failureSummary(error) });
    }
    throw error;
  }
}

function failureSummary(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  if (cause instanceof ApplicationFailure) return `${cause.type ?? 'Error'}: ${cause.message}`;
  return error instanceof Error ? error.message : String(error);
}

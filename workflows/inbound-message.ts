import { log, setWorkflowOptions } from '@temporalio/workflow';
import type { InboundMessageInput, InboundMessageResult } from '../contract';
import { startRun } from './message/run';
import {
  acknowledge,
  answeredTogether,
  awaitVerdict,
  decide,
  draft,
  endErased,
  failRun,
  handOffToTicket,
  isErased,
  leaveToPerson,
  noteOnTicket,
  openThreadTicket,
  sendReply,
  skipMessage,
} from './message/steps';

/**
 * One workflow per inbound message (its ID comes from inbox_id + message_id): decide whether a
 * reply is owed, take the thread's turn, draft it, open a ticket, [wait for a person's approval],
 * send it, label the message. Deterministic: every effect happens in an activity that claims its
 * own operation key, and only IDs and keys pass through here, never bodies or drafted text (history
 * is stored unencrypted; an edited text in a reviewer's payload is the one exception, documented).
 * Each step is a named function of workflows/message/steps.ts.
 *
 * Worker Versioning: a message's run finishes on the build it started on, however long it waits
 * for approval, so a new build may change this code freely (docs/changing-the-workflow.md).
 */
setWorkflowOptions({ versioningBehavior: 'PINNED' }, inboundMessageWorkflow);
export async function inboundMessageWorkflow(input: InboundMessageInput): Promise<InboundMessageResult> {
  const run = startRun(input);
  try {
    const decision = await decide(run);
    if (!decision.reply) return await skipMessage(run, decision);

    // The ticket does not depend on the draft or the turn: it runs alongside, and is awaited to its
    // end before a failure of the other is raised, so a message whose draft fails still has its
    // ticket. Until then (the turn may take days behind an approval) a failure of it must not count
    // as an unhandled rejection, which would fail workflow tasks, not the run.
    const ticketing = openThreadTicket(run, decision, null).then((ticketId) => ticketId as string);
    void ticketing.catch(() => undefined);

    // A thread is answered in order, one message at a time (workflows/message/turn.ts).
    const turn = await run.turn.take({ ...run.ref, threadId: decision.threadId }, (burstLeftMs) => {
      run.setStatus('waiting_turn');
      if (burstLeftMs > 0)
        log.info(`waiting ${Math.ceil(burstLeftMs / 1000)} s for the customer's burst to end (REPLY_COALESCE_MS)`);
    });
    // Covered by its own reply: another run of this very message (an operator's replay under another
    // id) held the turn and sent it. Nothing is owed; the steps below replay that run's stored draft
    // and send under the same keys, so this run ends `sent` with the same email, not a second one.
    if (turn.kind === 'covered' && turn.by !== run.ref.messageId)
      return await answeredTogether(run, ticketing, turn.by);
    if (turn.kind === 'person-answering') return await leaveToPerson(run, ticketing);
    const covers = turn.kind === 'go' ? turn.covers : [];

    const [drafted, ticketId] = await draft(run, ticketing);
    // The agent did not know: the ticket gets an internal note with the reason and the articles
    // considered. With HANDOFF=ticket, in an inbox that needs no approval, that note is the answer.
    const { handoff } = drafted;
    // A person decides when the inbox requires it, or when the drafted text tripped a rule
    // (activities/draft/draft-check.ts): then it is held, never sent unless a person approves.
    // The customer may hear that a person answers (once, before the reply or the run's end).
    const needsVerdict = decision.approval.required || handoff !== null || drafted.holds.length > 0;
    const occasion = handoff !== null ? 'handoff' : drafted.holds.length > 0 ? 'held' : 'approval';
    const acknowledged =
      needsVerdict && (decision.acknowledgeOn?.includes(occasion) ?? true)
        ? acknowledge(run, occasion)
        : Promise.resolve();
    if (handoff !== null) {
      await noteOnTicket(
        run,
        ticketId,
        decision.approval.required || handoff.route === 'review'
          ? 'handed off by the support agent, awaiting review'
          : 'handed off by the support agent: a person answers',
      );
      if (!decision.approval.required && handoff.route === 'ticket') {
        await handOffToTicket(run, drafted);
        await acknowledged;
        return { status: 'handed_off', ticketId, covers };
      }
    }
    const version = needsVerdict ? await awaitVerdict(run, decision, drafted, ticketId) : 1;
    await acknowledged;
    if (version === null) return { status: 'rejected', ticketId, covers };
    return await sendReply(run, version, ticketId, covers);
  } catch (error) {
    if (isErased(error)) return await endErased(run);
    await failRun(run, error);
    throw error;
  }
}

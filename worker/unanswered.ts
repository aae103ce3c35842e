import { INBOUND_MESSAGE_WORKFLOW, type ReplyStatus, SearchAttributes } from '../contract';

/**
 * A message is "unanswered" while its workflow still runs, past this age, and is not waiting for a
 * reviewer (that wait is intended and has its own timeout). Fifteen minutes: a healthy run takes
 * seconds, a run retrying a provider outage backs off to a minute between attempts, so a quarter
 * of an hour means a person should look.
 */
export const UNANSWERED_AFTER_MS = 15 * 60 * 1000;

/** The visibility query behind replyonce_unanswered_messages. */
export function unansweredQuery(now: Date): string {
  const awaiting: ReplyStatus = 'awaiting_approval';
  // A hand-off that waits for a review (HANDOFF=review, or an approval inbox) is such a wait too;
  // one that ends in a ticket is no longer running.
  const handedOff: ReplyStatus = 'handed_off';
  const since = new Date(now.getTime() - UNANSWERED_AFTER_MS).toISOString();
  return [
    `WorkflowType = '${INBOUND_MESSAGE_WORKFLOW}'`,
    `ExecutionStatus = 'Running'`,
    `${SearchAttributes.ReplyStatus.name} != '${awaiting}'`,
    `${SearchAttributes.ReplyStatus.name} != '${handedOff}'`,
    `StartTime < '${since}'`,
  ].join(' AND ');
}

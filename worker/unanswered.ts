import { INBOUND_MESSAGE_WORKFLOW, type ReplyStatus, SearchAttributes } from '../contract';

/**
 * A message is "unanswered" while its workflow still runs past this age, whatever it waits for —
 * a provider, its turn, a person — except an approval inbox's reply awaiting its verdict: that wait
 * is configured and escalates itself at APPROVAL_TIMEOUT_MS (then `escalated`, counted). A hand-off
 * (`handed_off`) is counted: the agent did not know, and nothing else tells a person it waits.
 * Fifteen minutes: a healthy run takes seconds, a run retrying a provider outage backs off to a
 * minute between attempts, so a quarter of an hour means a person should look.
 */
export const UNANSWERED_AFTER_MS = 15 * 60 * 1000;

/**
 * The visibility query behind replyonce_unanswered_messages. `nothingDispatched`: the worker's
 * deployment has no current version (worker/routing-watch.ts), so no run can be answered however
 * long it waits: every run counts at once, not after UNANSWERED_AFTER_MS. A run started by hand
 * (`temporal workflow start`) has no ReplyStatus until its first task: it counts too.
 */
export function unansweredQuery(now: Date, options: { nothingDispatched?: { taskQueue: string } } = {}): string {
  const awaiting: ReplyStatus = 'awaiting_approval';
  const since = new Date(now.getTime() - UNANSWERED_AFTER_MS).toISOString();
  const status = SearchAttributes.ReplyStatus.name;
  return [
    `WorkflowType = '${INBOUND_MESSAGE_WORKFLOW}'`,
    `ExecutionStatus = 'Running'`,
    `(${status} != '${awaiting}' OR ${status} IS NULL)`,
    // Nothing dispatched: this worker's queue, whatever the age (another deployment's queue may be served).
    ...(options.nothingDispatched
      ? [`TaskQueue = '${options.nothingDispatched.taskQueue}'`]
      : [`StartTime < '${since}'`]),
  ].join(' AND ');
}

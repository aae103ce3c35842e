// Bundled into the workflow code (a workflow interceptor module): deterministic, no I/O. It tells
// the worker how each inbound-message run ended through a sink, which the worker counts in
// replyonce_workflow_outcomes_total. Sinks are not called while a run is replayed, so each
// ending is counted once.
//
// It also writes the lines a person follows a message by, one info line per outcome: decided
// (reply, or skip and why), drafted, verdict accepted (by whom), sent / replayed / skipped /
// rejected / failed (with the failure's type and message). The workflow logs the wait for a person
// itself (awaiting approval). `log` from @temporalio/workflow is replay-safe (nothing is logged
// while a run is replayed) and carries the workflow id; no line carries customer text: ids,
// reasons, counts and failure types only.
import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  ChildWorkflowFailure,
  log,
  proxySinks,
  TemporalFailure,
  workflowInfo,
  type Sinks,
  type WorkflowInterceptorsFactory,
} from '@temporalio/workflow';
import { INBOUND_MESSAGE_WORKFLOW, type InboundMessageResult } from '../../contract';

export type EndedStatus = InboundMessageResult['status'] | 'failed';

export interface OutcomeSinks extends Sinks {
  outcomes: { ended(status: EndedStatus): void };
}

const { outcomes } = proxySinks<OutcomeSinks>();

/** The line for an activity's result, or none: only the steps a person follows a message by. */
function activityLine(activityType: string, result: unknown): [string, Record<string, unknown>] | undefined {
  const r = (result ?? {}) as Record<string, unknown>;
  const replayed = (r.operation as { state?: string } | undefined)?.state === 'replayed';
  switch (activityType) {
    case 'decideReply': {
      const approval = (r.approval as { required?: boolean } | undefined)?.required === true;
      return r.reply === true
        ? [`decided: reply${approval ? ' (approval required)' : ''}`, { decision: 'reply', approvalRequired: approval }]
        : [`decided: skip (${String(r.reason)})`, { decision: 'skip', reason: r.reason }];
    }
    case 'draftReply':
    case 'reviseDraft':
      return [
        `${activityType === 'reviseDraft' ? "drafted the reviewer's edit" : 'drafted'}${replayed ? ' (stored draft reused)' : ''}`,
        { characters: r.characters, replayed },
      ];
    case 'sendReply':
    case 'sendApprovedDraft':
      return r.replayed === true
        ? ['reply replayed: it was sent before, nothing sent again', { replyMessageId: r.messageId, replayed: true }]
        : ['reply sent', { replyMessageId: r.messageId, reconciled: r.reconciled === true }];
    default:
      return undefined;
  }
}

/** `Type: message` of what ended a run: the application failure under an activity's or child's failure. */
export function describeFailure(error: unknown): { failureType: string; failure: string } {
  let cause: unknown = error;
  while ((cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) && cause.cause)
    cause = cause.cause;
  const failureType =
    cause instanceof ApplicationFailure ? (cause.type ?? 'Error') : cause instanceof Error ? cause.name : 'Error';
  const failure = cause instanceof Error ? cause.message : String(cause);
  return { failureType, failure };
}

function endLine(result: InboundMessageResult): [string, Record<string, unknown>] {
  switch (result.status) {
    case 'sent':
      return [
        result.replayed ? 'ended: sent (replayed, nothing sent twice)' : 'ended: sent',
        { status: result.status, replyVersion: result.replyVersion, ticketId: result.ticketId },
      ];
    case 'skipped':
      return [`ended: skipped (${result.reason})`, { status: result.status, reason: result.reason }];
    default:
      return [`ended: ${result.status}`, { status: result.status }];
  }
}

const ofInboundMessage = () => workflowInfo().workflowType === INBOUND_MESSAGE_WORKFLOW;

export const interceptors: WorkflowInterceptorsFactory = () => {
  if (!ofInboundMessage()) return {};
  const logResult = async (activityType: string, run: () => Promise<unknown>) => {
    const result = await run();
    const line = activityLine(activityType, result);
    if (line) log.info(line[0], line[1]);
    return result;
  };
  return {
    inbound: [
      {
        async execute(input, next) {
          try {
            const result = (await next(input)) as InboundMessageResult;
            outcomes.ended(result.status);
            log.info(...endLine(result));
            return result;
          } catch (error) {
            // A Temporal failure ends the run; any other error fails only the workflow task, which retries.
            if (error instanceof TemporalFailure && !(error instanceof CancelledFailure)) {
              outcomes.ended('failed');
              const { failureType, failure } = describeFailure(error);
              log.info(`ended: failed (${failureType}: ${failure})`, { status: 'failed', failureType, failure });
            }
            throw error;
          }
        },
        async handleUpdate(input, next) {
          const answer = await next(input); // a verdict refused by the validator never reaches here
          if (input.name === 'review') {
            const verdict = (input.args[0] ?? {}) as { verdict?: string; reviewer?: string; revision?: number };
            log.info(`verdict accepted: ${String(verdict.verdict)} by ${verdict.reviewer ?? 'an unnamed reviewer'}`, {
              verdict: verdict.verdict,
              reviewer: verdict.reviewer ?? null,
              ...(verdict.revision !== undefined ? { revision: verdict.revision } : {}),
            });
          }
          return answer;
        },
        async handleSignal(input, next) {
          await next(input);
          if (input.signalName === 'review') {
            const verdict = (input.args[0] ?? {}) as { verdict?: string; reviewer?: string };
            log.info(
              `verdict received by signal: ${String(verdict.verdict)} by ${verdict.reviewer ?? 'an unnamed reviewer'} (the first valid verdict counts)`,
              { verdict: verdict.verdict, reviewer: verdict.reviewer ?? null },
            );
          }
        },
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => logResult(input.activityType, () => next(input)),
        scheduleLocalActivity: (input, next) => logResult(input.activityType, () => next(input)),
      },
    ],
  };
};

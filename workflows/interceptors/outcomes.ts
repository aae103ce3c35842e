// Bundled into the workflow code (a workflow interceptor module): deterministic, no I/O. It tells
// the worker how each inbound-message run ended through a sink, which the worker counts in
// replyonce_workflow_outcomes_total. Sinks are not called while a run is replayed, so each
// ending is counted once.
import {
  CancelledFailure,
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

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        if (workflowInfo().workflowType !== INBOUND_MESSAGE_WORKFLOW) return next(input);
        try {
          const result = (await next(input)) as InboundMessageResult;
          outcomes.ended(result.status);
          return result;
        } catch (error) {
          // A Temporal failure ends the run; any other error fails only the workflow task, which retries.
          if (error instanceof TemporalFailure && !(error instanceof CancelledFailure)) outcomes.ended('failed');
          throw error;
        }
      },
    },
  ],
});

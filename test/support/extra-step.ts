// Test only: "build B" of the rolling-deploy test (test/production-topology.test.ts) and the
// replay test's proof that a changed command sequence is caught. Bundled into a workflow bundle as
// an extra workflow interceptor module, it adds one step before every send of a reply — a short
// durable timer — so B's runs record a TimerStarted before their ActivityTaskScheduled(send…), and
// B's code cannot replay A's histories that reached the send. Never part of a production bundle.
import { sleep, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** The module's path, for `workflowInterceptorModules`. */
export const EXTRA_STEP_INTERCEPTOR = __filename;

const SENDS = new Set(['sendReply', 'sendApprovedDraft']);

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async scheduleActivity(input, next) {
        if (SENDS.has(input.activityType)) await sleep('1 second');
        return next(input);
      },
    },
  ],
});

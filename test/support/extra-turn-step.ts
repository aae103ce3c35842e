// Test only: the replay test's proof that a change to the thread's turn keeper is caught. Bundled
// as an extra workflow interceptor module, it adds one step — a short durable timer — before every
// signal a workflow sends to another (the turn keeper's "your turn" and "covered"), so the changed
// code cannot replay a recorded thread history. A separate module from extra-step.ts: the rolling
// deploy's build B must keep the keeper as it is (thread workflows follow the current build).
import { sleep, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** The module's path, for `workflowInterceptorModules`. */
export const EXTRA_TURN_STEP_INTERCEPTOR = __filename;

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async signalWorkflow(input, next) {
        await sleep('1 second');
        return next(input);
      },
    },
  ],
});

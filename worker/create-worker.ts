import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';
import { activeTracing, annotateActiveSpan, type Tracing } from '../lib/tracing';

export interface ReplyonceWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** A prebuilt workflow bundle (tests build one per suite); otherwise the workflows are bundled at start. */
  workflowBundlePath?: string | undefined;
  maxConcurrentActivityTaskExecutions?: number;
}

/** Builds the worker: the same wiring for `npm run start:worker`, `npm run dev` and the tests. */
export async function createReplyonceWorker(options: ReplyonceWorkerOptions): Promise<Worker> {
  const workflows: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = options.workflowBundlePath
    ? { workflowBundle: { codePath: options.workflowBundlePath } }
    : { workflowsPath: require.resolve('../workflows') };
  const tracing = activeTracing();
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: createActivities(options.deps),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 50,
    ...workflows,
    ...(tracing ? tracedWorkerOptions(tracing) : {}),
  });
}

/**
 * Tracing's interceptors, only when tracing is on (off, the worker has none). The workflow side is
 * bundled into the workflow code and exports its spans through a sink, so workflow code stays
 * deterministic; a prebuilt bundle (REPLYONCE_WORKFLOW_BUNDLE) must have been built with
 * {@link TRACING_WORKFLOW_MODULES} as `workflowInterceptorModules`, or Temporal warns and the
 * workflow's spans are missing.
 */
function tracedWorkerOptions(tracing: Tracing): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  return {
    interceptors: {
      workflowModules: TRACING_WORKFLOW_MODULES,
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
        // Inside the one above, so the active span is the activity's: which attempt this is.
        (ctx) => ({
          inbound: {
            execute: (input, next) => {
              annotateActiveSpan({
                'temporal.activity.type': ctx.info.activityType,
                'temporal.activity.attempt': ctx.info.attempt,
                'temporal.activity.local': ctx.info.isLocal,
              });
              return next(input);
            },
          },
        }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) },
  };
}

/** The workflow interceptor modules tracing needs in the workflow bundle. */
export const TRACING_WORKFLOW_MODULES = [
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors'),
];

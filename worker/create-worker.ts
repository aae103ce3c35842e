import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import {
  bundleWorkflowCode,
  DefaultLogger,
  type NativeConnection,
  Worker,
  type WorkerOptions,
} from '@temporalio/worker';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { createActivities, type ActivityDeps } from '../activities';
import { workflowOutcomes } from '../lib/metrics';
import { activeTracing, annotateActiveSpan, type Tracing } from '../lib/tracing';
import type { EndedStatus } from '../workflows/interceptors/outcomes';

export interface ReplyonceWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  /** A prebuilt workflow bundle (tests build one per suite); otherwise the workflows are bundled at start. */
  workflowBundlePath?: string | undefined;
  maxConcurrentActivityTaskExecutions?: number;
  /**
   * The Worker Deployment Version this worker runs (Worker Versioning). Each workflow type says how
   * its runs move between versions (workflows/*.ts: message runs PINNED, the schedules' AUTO_UPGRADE).
   */
  deployment: WorkerDeploymentVersion;
}

/** The worker: one Temporal Worker polling the task queue (message runs, their activities, the schedules). */
export interface ReplyonceWorker {
  run(): Promise<void>;
  shutdown(): void;
  getState(): ReturnType<Worker['getState']>;
}

/** Workflow tasks (and their local activities) a worker runs at once: Temporal's default. */
const WORKFLOW_TASK_SLOTS = 40;

/** Builds the worker: the same wiring for `npm run start:worker`, `npm run dev` and the tests. */
export async function createReplyonceWorker(options: ReplyonceWorkerOptions): Promise<ReplyonceWorker> {
  const active = activeTracing();
  const tracing = active && tracedWorkerOptions(active);
  // A bundle holds the workflow interceptor modules it was built with (a prebuilt one, e.g. the
  // tests', with WORKFLOW_INTERCEPTOR_MODULES); naming them again would only make Temporal warn.
  const workflows: Pick<WorkerOptions, 'workflowBundle'> = options.workflowBundlePath
    ? { workflowBundle: { codePath: options.workflowBundlePath } }
    : {
        workflowBundle: await bundleQuietly([
          ...WORKFLOW_INTERCEPTOR_MODULES,
          ...(tracing ? TRACING_WORKFLOW_MODULES : []),
        ]),
      };
  const activities = createActivities(options.deps);
  const common = {
    connection: options.connection,
    namespace: options.namespace,
    activities,
    workerDeploymentOptions: {
      useWorkerVersioning: true,
      version: options.deployment,
      // A workflow type that names no behaviour of its own stays on the build it started on.
      defaultVersioningBehavior: 'PINNED' as const,
    },
    ...workflows,
    interceptors: { ...tracing?.interceptors },
    sinks: {
      outcomes: { ended: { fn: (_info, status: EndedStatus) => workflowOutcomes.inc({ status }) } },
      ...tracing?.sinks,
    },
  } satisfies Partial<WorkerOptions>;
  const worker = await Worker.create({
    ...common,
    taskQueue: options.taskQueue,
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 50,
    // How many workflow tasks a worker takes on at once. Every one runs on the worker's one workflow
    // thread, and a worker that has just started (or taken over from a dead one) replays each from
    // its history: with 200 it took on more than it could answer within the 10 s workflow task
    // timeout, every one of them timed out and went to the next worker, which did the same (the soak,
    // docs/deployment.md).
    maxConcurrentWorkflowTaskExecutions: WORKFLOW_TASK_SLOTS,
    maxConcurrentLocalActivityExecutions: WORKFLOW_TASK_SLOTS,
  });
  return {
    run: () => worker.run(),
    shutdown() {
      if (worker.getState() === 'RUNNING' || worker.getState() === 'INITIALIZED') worker.shutdown();
    },
    getState: () => worker.getState(),
  };
}

/**
 * Bundled here rather than by Worker.create, whose bundler logs webpack's whole report at info as
 * one log line: only the bundler's warnings and errors reach the process's log.
 */
async function bundleQuietly(workflowInterceptorModules: string[]): Promise<{ code: string }> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    workflowInterceptorModules,
    logger: new DefaultLogger('WARN'),
  });
  return { code };
}

/**
 * The workflow interceptor modules every worker's bundle holds (a bundle built ahead, e.g. by the
 * tests, passes these as `workflowInterceptorModules`): how each message's run ended, for /metrics.
 */
export const WORKFLOW_INTERCEPTOR_MODULES = [require.resolve('../workflows/interceptors/outcomes')];

/**
 * Tracing's interceptors, only when tracing is on (off, the worker has none). The workflow side is
 * bundled into the workflow code and exports its spans through a sink, so workflow code stays
 * deterministic. A prebuilt bundle (REPLYONCE_WORKFLOW_BUNDLE) has no workflow spans unless it was
 * built with {@link TRACING_WORKFLOW_MODULES} too; the activities' spans then start new traces.
 */
function tracedWorkerOptions(tracing: Tracing) {
  return {
    interceptors: {
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
    } satisfies WorkerOptions['interceptors'],
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) },
  };
}

/** The workflow interceptor modules tracing needs in the workflow bundle. */
export const TRACING_WORKFLOW_MODULES = [
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors'),
];

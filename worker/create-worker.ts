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
import { KEEPER_STICKY_TIMEOUT_MS, turnKeeperTaskQueue } from '../contract';
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

/**
 * The worker: two Temporal Workers of one build in one process. The main one polls the task queue
 * (message runs, their activities, the schedules); the other polls the turn keepers' own queue
 * (`<task queue>-turns`, contract/workflow.ts). A message's local activity waits for its keeper's
 * answer while holding a workflow-task slot of the main Worker, so a keeper that shared those slots
 * would wait behind the very messages waiting for it: with its own queue and slots it never does.
 */
export interface ReplyonceWorker {
  run(): Promise<void>;
  shutdown(): void;
  /** RUNNING once both poll; otherwise the state of the one that does not. */
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
  // Temporal waits for a local activity when its worker stops, and never cancels it: the turn
  // activities are told by this instead, so a stop is never held open by a keeper's answer.
  const stopping = new AbortController();
  const activities = createActivities(options.deps, stopping.signal);
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
  const main = await Worker.create({
    ...common,
    taskQueue: options.taskQueue,
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 50,
    // How many workflow tasks a worker takes on at once. Every one runs on the worker's one workflow
    // thread, and a worker that has just started (or taken over from a dead one) replays each from
    // its history: with 200 it took on more than it could answer within the 10 s workflow task
    // timeout, every one of them timed out and went to the next worker, which did the same (the soak,
    // docs/deployment.md). A message's turn request holds its task at most TURN_UPDATE_WAIT_MS.
    maxConcurrentWorkflowTaskExecutions: WORKFLOW_TASK_SLOTS,
    maxConcurrentLocalActivityExecutions: WORKFLOW_TASK_SLOTS,
  });
  // The keepers' queue runs only keepers and their one local activity (which runs asks about a few runs).
  const turns = await Worker.create({
    ...common,
    taskQueue: turnKeeperTaskQueue(options.taskQueue),
    maxConcurrentActivityTaskExecutions: 4,
    // A keeper's next task waits for this worker only briefly: if it died, another takes the keeper on.
    stickyQueueScheduleToStartTimeout: KEEPER_STICKY_TIMEOUT_MS,
  });
  const workers = [main, turns];
  return {
    async run() {
      // One stopping (a fatal error, or shutdown) stops the other: the process runs both or neither.
      await Promise.all(
        workers.map((worker) =>
          worker.run().finally(() => {
            stopping.abort();
            for (const other of workers) if (other.getState() === 'RUNNING') other.shutdown();
          }),
        ),
      );
    },
    shutdown() {
      stopping.abort();
      for (const worker of workers)
        if (worker.getState() === 'RUNNING' || worker.getState() === 'INITIALIZED') worker.shutdown();
    },
    getState() {
      return workers.map((worker) => worker.getState()).find((state) => state !== 'RUNNING') ?? 'RUNNING';
    },
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

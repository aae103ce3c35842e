import {
  bundleWorkflowCode,
  DefaultLogger,
  type NativeConnection,
  Worker,
  type WorkerOptions,
} from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities';

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
  const workflows: Pick<WorkerOptions, 'workflowBundle'> = options.workflowBundlePath
    ? { workflowBundle: { codePath: options.workflowBundlePath } }
    : { workflowBundle: await bundleQuietly() };
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: createActivities(options.deps),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 50,
    ...workflows,
  });
}

/**
 * Bundled here rather than by Worker.create, whose bundler logs webpack's whole report at info as
 * one log line: only the bundler's warnings and errors reach the process's log.
 */
async function bundleQuietly(): Promise<{ code: string }> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    logger: new DefaultLogger('WARN'),
  });
  return { code };
}

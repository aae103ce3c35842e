import { type NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
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
  const workflows: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = options.workflowBundlePath
    ? { workflowBundle: { codePath: options.workflowBundlePath } }
    : { workflowsPath: require.resolve('../workflows') };
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: createActivities(options.deps),
    maxConcurrentActivityTaskExecutions: options.maxConcurrentActivityTaskExecutions ?? 50,
    ...workflows,
  });
}

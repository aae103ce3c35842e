import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { workerBuildId } from '../../worker/deployment';
import type { Failpoint } from '../../lib/failpoints';
import { testEnv } from './env';
import type { Harness } from './harness';

const repoRoot = path.resolve(__dirname, '..', '..');

/**
 * A real app process (`worker/main.ts` or `api/main.ts`, as `npm run start:worker` and
 * `start:api` run them) pointed at a harness's sandbox and task queue, so a test can SIGKILL
 * it in the middle of an effect. Its JSON log lines are kept for the test to read.
 */
export class AppProcess {
  readonly logLines: Array<Record<string, unknown>> = [];
  /** What the process wrote to stderr (start-up failures are reported there). */
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    let pending = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        try {
          this.logLines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // not a log line (e.g. webpack or tsx output): ignore
        }
      }
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
      if (process.env.TEST_LOG_LEVEL) process.stderr.write(`[${child.pid}] ${chunk}`);
    });
  }

  static async startWorker(
    h: Harness,
    options: { failpoints?: Failpoint[]; leaseMs?: number; env?: Record<string, string> } = {},
  ): Promise<AppProcess> {
    const worker = AppProcess.spawnWorker(h, options);
    // A cold start under tsx, then its version registered with the server (and made current): a
    // loaded CI machine needs most of a minute. A worker that missed the deadline is killed:
    // polling later, unseen, it would take the next test's tasks.
    await worker
      .waitForLog((line) => line.msg === 'worker polling', 'the worker to start polling', 60_000)
      .catch(async (error: unknown) => {
        await worker.stop();
        throw error;
      });
    return worker;
  }

  /** A worker process, not waited for: a test of start-up failures watches it exit. */
  static spawnWorker(
    h: Harness,
    options: { failpoints?: Failpoint[]; leaseMs?: number; env?: Record<string, string> } = {},
  ): AppProcess {
    return AppProcess.spawn('worker', h, options.failpoints, {
      AGENTMAIL_API_KEY: h.apiKey,
      AGENTMAIL_BASE_URL: h.sandboxUrl,
      REPLYONCE_WORKFLOW_BUNDLE: testEnv.workflowBundle,
      OPERATION_LEASE_MS: String(options.leaseMs ?? 2_000),
      // Conversations: no burst window unless a test asks for one (test/conversations.test.ts).
      REPLY_COALESCE_MS: '0',
      METRICS_PORT: '0',
      PUBLIC_WEBHOOK_URL: `${h.apiUrl}/webhooks/agentmail`,
      WORKER_DEPLOYMENT_NAME: h.deploymentName,
      WORKER_PROMOTE_ON_START: 'true',
      // The harness's build (scripts/test.ts fixes it for the run), never a commit made since.
      WORKER_BUILD_ID: workerBuildId(),
      ...options.env,
    });
  }

  /** The ingress on a free loopback port; `url` is its base URL once it listens. */
  static async startApi(
    h: Harness,
    options: { failpoints?: Failpoint[]; env?: Record<string, string> } = {},
  ): Promise<AppProcess & { url: string; metricsUrl: string }> {
    const api = AppProcess.spawnApi(h, options);
    await api
      .waitForLog((line) => line.msg === 'api listening', 'the API to listen', 30_000)
      .catch(async (error: unknown) => {
        await api.stop();
        throw error;
      });
    const url = String(api.logs('api listening')[0]?.address);
    // The metrics listener of its own (API_METRICS_PORT), never the public port.
    const metricsUrl = String(api.logs('api listening')[0]?.metrics);
    return Object.assign(api, { url, metricsUrl });
  }

  /** An API process, not waited for: a test of start-up failures watches it exit. */
  static spawnApi(h: Harness, options: { failpoints?: Failpoint[]; env?: Record<string, string> } = {}): AppProcess {
    return AppProcess.spawn('api', h, options.failpoints, {
      AGENTMAIL_WEBHOOK_SECRET: h.webhookSecret,
      PORT: '0',
      HOST: '127.0.0.1',
      API_METRICS_PORT: '0',
      ...options.env,
    });
  }

  private static spawn(
    entry: 'worker' | 'api',
    h: Harness,
    failpoints: Failpoint[] = [],
    env: Record<string, string | undefined>,
  ): AppProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, entry, 'main.ts')], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        ...testEnv.temporalVars,
        TEMPORAL_ADDRESS: testEnv.temporalAddress,
        TEMPORAL_NAMESPACE: testEnv.namespace,
        TEMPORAL_TASK_QUEUE: h.taskQueue,
        DATABASE_URL: testEnv.databaseUrl,
        REPLYONCE_FAILPOINTS: failpoints.join(','),
        LOG_LEVEL: 'info',
        ...env,
      },
    });
    return new AppProcess(child);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Log lines whose message is `msg` and whose fields include `fields`. */
  logs(msg: string, fields: Record<string, unknown> = {}): Array<Record<string, unknown>> {
    return this.logLines.filter((line) => line.msg === msg && Object.entries(fields).every(([k, v]) => line[k] === v));
  }

  async waitForLog(match: (line: Record<string, unknown>) => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void this.exited.then(() => (exited = true));
    while (!this.logLines.some(match)) {
      if (exited) throw new Error(`the process exited while waiting for ${what}: ${this.stderr.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

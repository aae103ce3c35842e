import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Failpoint } from '../../lib/failpoints';
import { testEnv } from './env';
import type { Harness } from './harness';

const repoRoot = path.resolve(__dirname, '..', '..');

/**
 * A real worker process (`worker/main.ts`, as `npm run start:worker` runs it) pointed at a
 * harness's sandbox and task queue, so a test can SIGKILL it in the middle of an effect.
 * Its JSON log lines are kept for the test to read.
 */
export class WorkerProcess {
  readonly logLines: Array<Record<string, unknown>> = [];
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
      if (process.env.TEST_LOG_LEVEL) process.stderr.write(`[worker ${child.pid}] ${chunk}`);
    });
  }

  static async start(h: Harness, options: { failpoints?: Failpoint[]; leaseMs?: number } = {}): Promise<WorkerProcess> {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'worker', 'main.ts')], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        TEMPORAL_ADDRESS: testEnv.temporalAddress,
        TEMPORAL_NAMESPACE: testEnv.namespace,
        TEMPORAL_TASK_QUEUE: h.taskQueue,
        DATABASE_URL: testEnv.databaseUrl,
        AGENTMAIL_API_KEY: h.apiKey,
        AGENTMAIL_BASE_URL: h.sandboxUrl,
        REPLYONCE_WORKFLOW_BUNDLE: testEnv.workflowBundle,
        REPLYONCE_FAILPOINTS: (options.failpoints ?? []).join(','),
        OPERATION_LEASE_MS: String(options.leaseMs ?? 2_000),
        LOG_LEVEL: 'info',
      },
    });
    const worker = new WorkerProcess(child);
    await worker.waitForLog((line) => line.msg === 'worker polling', 'the worker to start polling', 30_000);
    return worker;
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
      if (exited) throw new Error(`worker process exited while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }
}

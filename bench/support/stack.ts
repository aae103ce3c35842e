import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { freePort } from '../../scripts/services/ports';
import { DATA, NAMESPACE, type Environment } from './environment';
import { ServerProcess } from './processes';

/**
 * The processes under test: the AgentMail sandbox (one for the whole bench, reset between
 * runs), our API and worker (a fresh pair, on a fresh task queue, per run: no run inherits
 * another's backlog), and the baseline.
 */

export const LOGS = path.join(DATA, 'logs');

export interface Secrets {
  webhookSecret: string;
  apiKey: string;
}

export const newSecrets = (): Secrets => ({
  webhookSecret: `whsec_${randomBytes(24).toString('base64')}`,
  apiKey: `am_bench_${randomBytes(12).toString('hex')}`,
});

function entry(env: Environment, name: string): string {
  return env.tsx ? path.join(env.codeRoot, `${name}.ts`) : path.join(env.codeRoot, `${name}.js`);
}

/** A URL that answers 2xx, or false. */
async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

export interface Sandbox {
  url: string;
  process: ServerProcess;
}

export async function startSandbox(env: Environment, secrets: Secrets): Promise<Sandbox> {
  const port = await freePort();
  const sandbox = ServerProcess.start({
    name: 'sandbox',
    entry: entry(env, 'sandbox/main'),
    tsx: env.tsx,
    logFile: path.join(LOGS, 'sandbox.log'),
    env: {
      PATH: process.env.PATH,
      SANDBOX_PORT: String(port),
      AGENTMAIL_API_KEY: secrets.apiKey,
      AGENTMAIL_WEBHOOK_SECRET: secrets.webhookSecret,
      // The stand-in is not under test: its per-request log lines would only cost CPU.
      LOG_LEVEL: 'warn',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  await sandbox.waitUntil(() => answers(`${url}/_sandbox/state`), 'the sandbox to listen');
  return { url, process: sandbox };
}

export interface OurStack {
  apiUrl: string;
  taskQueue: string;
  api: ServerProcess;
  worker: ServerProcess;
  stop(): Promise<void>;
}

export interface StackOptions {
  /** Write CPU profiles of the API and the worker here. */
  cpuProfileDir?: string | undefined;
  /** Extra environment for the API and the worker (e.g. a setting under test). */
  env?: Record<string, string>;
  /** Start no worker (the ingress alone). */
  worker?: boolean;
}

export async function startOurs(
  env: Environment,
  sandbox: Sandbox,
  secrets: Secrets,
  options: StackOptions = {},
): Promise<OurStack> {
  const taskQueue = `bench-${randomUUID().slice(0, 8)}`;
  const common = {
    PATH: process.env.PATH,
    ...env.temporalEnv,
    TEMPORAL_NAMESPACE: NAMESPACE,
    TEMPORAL_TASK_QUEUE: taskQueue,
    DATABASE_URL: env.databaseUrl,
    // As in production: info-level JSON logs (here into a file, as a log collector would read them).
    LOG_LEVEL: 'info',
    NODE_ENV: 'production',
    ...options.env,
  };
  const worker =
    options.worker === false
      ? undefined
      : ServerProcess.start({
          name: 'worker',
          entry: entry(env, 'worker/main'),
          tsx: env.tsx,
          cpuProfileDir: options.cpuProfileDir,
          logFile: path.join(LOGS, 'worker.log'),
          env: {
            ...common,
            AGENTMAIL_API_KEY: secrets.apiKey,
            AGENTMAIL_BASE_URL: sandbox.url,
            REPLYONCE_WORKFLOW_BUNDLE: env.workflowBundle,
            METRICS_PORT: '0',
            WORKER_PROMOTE_ON_START: 'true', // Worker Versioning: nobody promotes a bench build by hand
            // Unique senders in the bench; the per-sender budget is not what is measured.
            REPLY_BUDGET_PER_SENDER: '1000000',
            // Thousands of replies an hour from a few inboxes: the per-inbox circuit breaker is not measured either.
            REPLY_CEILING_PER_INBOX_PER_HOUR: '1000000000',
            // Conversations' burst window is a wait an operator chooses, not a cost: off unless a
            // scenario sets it (the threads scenario does), so the drains measure the work.
            REPLY_COALESCE_MS: options.env?.REPLY_COALESCE_MS ?? '0',
          },
        });
  const port = await freePort();
  const api = ServerProcess.start({
    name: 'api',
    entry: entry(env, 'api/main'),
    tsx: env.tsx,
    cpuProfileDir: options.cpuProfileDir,
    logFile: path.join(LOGS, 'api.log'),
    env: { ...common, PORT: String(port), HOST: '127.0.0.1', AGENTMAIL_WEBHOOK_SECRET: secrets.webhookSecret },
  });
  const apiUrl = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await api.stop();
    await worker?.stop();
  };
  try {
    await api.waitUntil(() => answers(`${apiUrl}/readyz`), 'the API to be ready');
    if (worker) {
      await worker.waitUntil(() => worker.logLine('worker polling') !== undefined, 'the worker to poll');
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { apiUrl, taskQueue, api, worker: worker as ServerProcess, stop };
}

export interface BaselineServer {
  url: string;
  process: ServerProcess;
  stop(): Promise<void>;
}

export async function startBaseline(
  env: Environment,
  secrets: Secrets,
  options: { cpuProfileDir?: string | undefined } = {},
): Promise<BaselineServer> {
  return startReference(
    env,
    'baseline',
    'bench/baseline/main',
    { DATABASE_URL: env.databaseUrl, AGENTMAIL_WEBHOOK_SECRET: secrets.webhookSecret },
    options.cpuProfileDir,
  );
}

/** The start-only reference (bench/baseline/start-only.ts) on a fresh task queue no worker polls. */
export async function startStartOnly(env: Environment): Promise<BaselineServer> {
  return startReference(env, 'start-only', 'bench/baseline/start-only', {
    ...env.temporalEnv,
    TEMPORAL_NAMESPACE: NAMESPACE,
    TEMPORAL_TASK_QUEUE: `bench-start-only-${randomUUID().slice(0, 8)}`,
  });
}

/** A reference server from bench/baseline/ on a free port; ready when it logs "<name> listening". */
async function startReference(
  env: Environment,
  name: string,
  file: string,
  settings: Record<string, string>,
  cpuProfileDir?: string,
): Promise<BaselineServer> {
  const port = await freePort();
  const server = ServerProcess.start({
    name,
    entry: entry(env, file),
    tsx: env.tsx,
    cpuProfileDir,
    logFile: path.join(LOGS, `${name}.log`),
    env: { PATH: process.env.PATH, PORT: String(port), NODE_ENV: 'production', ...settings },
  });
  await server.waitUntil(() => server.logLine(`${name} listening`) !== undefined, `the ${name} reference to listen`);
  return { url: `http://127.0.0.1:${port}`, process: server, stop: () => server.stop() };
}

// `npm run dev`: the whole system on this machine, after scripts/setup.sh.
//
//   Temporal dev server   127.0.0.1:7233, Web UI :8233, state in .data/temporal/dev.sqlite   (unless TEMPORAL_ADDRESS)
//   PostgreSQL            the local cluster on 127.0.0.1:55432, database `replyonce`           (unless DATABASE_URL)
//   sandbox               the local AgentMail stand-in on :4010, mailbox in memory             (unless AGENTMAIL_API_KEY)
//   worker, api           the app, the API on :3000; logs pretty-printed (LOG_FORMAT=json for JSON);
//                         REPLY_COALESCE_MS 5 s unless set (30 s elsewhere), so a test email is answered soon
//   desk                  the review desk on :3300 (a first reviewer's token printed once)
//
// Ports: DEV_PORT_BASE=N puts the API on N, the sandbox on N+1, Temporal on N+2, its Web UI on
// N+3 and the desk on N+4; DEV_API_PORT, DEV_SANDBOX_PORT, DEV_TEMPORAL_PORT, DEV_TEMPORAL_UI_PORT,
// DEV_DESK_PORT move one each.
// Ctrl-C stops everything it started, the API first and Temporal last.
import path from 'node:path';
import { loadTemporalConfig } from '../lib/config';
import { migrateDatabase } from './db-migrate';
import { setupTemporal } from './services/temporal-setup';
import { firstReviewerToken } from './services/desk';
import { DEV_DEFAULTS, type DevPorts, devBanner, renderBanner } from './services/dev-banner';
import { loadDevSecrets } from './services/dev-secrets';
import { runMain } from './services/main';
import { assertPortFree, freePort, waitForPort } from './services/ports';
import { SetupError, sleep } from './services/main';
import { DEFAULT_DEV_DATABASE_URL, ensureDatabase, ensureLocalPostgres } from './services/postgres';
import { ProcessRecord } from './services/orphans';
import { ProcessGroup } from './services/processes';
import { startTemporalDevServer, type TemporalDevServer } from './services/temporal-dev-server';

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data');
/** The defaults, and their order from DEV_PORT_BASE. */
const DEFAULT_PORTS = { api: 3000, sandbox: 4010, temporal: 7233, temporalUi: 8233, desk: 3300 } as const;
const TASK_QUEUE = DEV_DEFAULTS.taskQueue;
/** `npm run dev`'s REPLY_COALESCE_MS unless set: a burst's window short enough to watch. */
export const DEV_COALESCE_MS = 5_000;
/** tsx compiles on first start; on a slow machine the API takes a while to listen. */
const LISTEN_TIMEOUT_MS = 60_000;
/** Bundling the workflow code comes first: the worker polls a while after the API listens. */
const POLL_TIMEOUT_MS = 120_000;

/** The dev stack's ports: the defaults, DEV_PORT_BASE's sequence, or one variable per service. */
export function devPorts(env: NodeJS.ProcessEnv): DevPorts {
  const port = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1 || value > 65535) {
      throw new SetupError(`${name} must be a port number (1–65535), got ${JSON.stringify(raw)}`);
    }
    return value;
  };
  const base = port('DEV_PORT_BASE', 0);
  if (base > 65531) throw new SetupError(`DEV_PORT_BASE must leave room for five ports (at most 65531), got ${base}`);
  const from = (offset: number, fallback: number) => (base === 0 ? fallback : base + offset);
  return {
    api: port('DEV_API_PORT', from(0, DEFAULT_PORTS.api)),
    sandbox: port('DEV_SANDBOX_PORT', from(1, DEFAULT_PORTS.sandbox)),
    temporal: port('DEV_TEMPORAL_PORT', from(2, DEFAULT_PORTS.temporal)),
    temporalUi: port('DEV_TEMPORAL_UI_PORT', from(3, DEFAULT_PORTS.temporalUi)),
    desk: port('DEV_DESK_PORT', from(4, DEFAULT_PORTS.desk)),
  };
}

async function main(): Promise<number> {
  const env = process.env;
  const namespace = env.TEMPORAL_NAMESPACE || 'replyonce';
  const useSandbox = !env.AGENTMAIL_API_KEY;
  const ports = devPorts(env);
  const API_PORT = ports.api;
  const SANDBOX_PORT = ports.sandbox;
  const DESK_PORT = ports.desk;
  const secrets = loadDevSecrets(path.join(DATA, 'dev-secrets.json'));
  const group = new ProcessGroup(ROOT, ['sandbox', 'worker', 'api', 'desk']);
  let temporal: TemporalDevServer | undefined;

  let shuttingDown: Promise<void> | undefined;
  const shutdown = () =>
    (shuttingDown ??= (async () => {
      await group.stopAll();
      if (temporal) {
        console.error('[dev] stopping the Temporal dev server…');
        await temporal.stop();
      }
    })());
  let signalled = false;
  const interrupted = new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      process.on(signal, () => {
        if (signalled) return; // the second Ctrl-C while stopping: we are already on it
        signalled = true;
        console.error(`\n[dev] ${signal}: stopping…`);
        resolve();
      });
    }
  });

  const record = await ProcessRecord.open(path.join(DATA, 'dev-processes.json'), '`npm run dev`');
  try {
    const portHint = 'Is another `npm run dev` running? DEV_PORT_BASE (or DEV_API_PORT, …) moves this one';
    await assertPortFree(API_PORT, 'API', portHint);
    await assertPortFree(DESK_PORT, 'review desk', portHint);
    if (useSandbox) await assertPortFree(SANDBOX_PORT, 'sandbox', portHint);

    const temporalAddress =
      env.TEMPORAL_ADDRESS || (await startTemporal((server) => (temporal = server), record, ports)).address;
    if (signalled) return 130;
    // A server of yours (TEMPORAL_ADDRESS) is reached with your TLS settings, as the processes reach it.
    const connection = env.TEMPORAL_ADDRESS ? loadTemporalConfig(env).temporal : undefined;
    await setupTemporal({ address: temporalAddress, connection, namespace, retentionDays: 7 });

    const databaseUrl = env.DATABASE_URL || (await localDatabase());
    await migrateDatabase(databaseUrl);
    const reviewerToken = await firstReviewerToken(databaseUrl);
    if (signalled) return 130;

    const webhookSecret = (useSandbox ? undefined : env.AGENTMAIL_WEBHOOK_SECRET) ?? secrets.agentmailWebhookSecret;
    const agentmail = useSandbox
      ? { AGENTMAIL_API_KEY: secrets.agentmailApiKey, AGENTMAIL_BASE_URL: `http://127.0.0.1:${SANDBOX_PORT}` }
      : { AGENTMAIL_API_KEY: env.AGENTMAIL_API_KEY, AGENTMAIL_BASE_URL: env.AGENTMAIL_BASE_URL };
    if (!useSandbox && !env.AGENTMAIL_WEBHOOK_SECRET) {
      console.error(
        '[dev] warning: AGENTMAIL_API_KEY is set but AGENTMAIL_WEBHOOK_SECRET is not; webhooks from AgentMail will fail verification',
      );
    }
    const appEnv: NodeJS.ProcessEnv = {
      ...env,
      ...agentmail,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      DATABASE_URL: databaseUrl,
      AGENTMAIL_WEBHOOK_SECRET: webhookSecret,
      PORT: String(API_PORT),
      // Pretty lines for a person in a terminal (LOG_FORMAT=json keeps JSON).
      LOG_FORMAT: env.LOG_FORMAT || 'pretty',
      // The webhook the sandbox posts to: the watchdog watches and re-enables that one only.
      ...(useSandbox ? { PUBLIC_WEBHOOK_URL: `http://127.0.0.1:${API_PORT}/webhooks/agentmail` } : {}),
      DESK_PUBLIC_URL: env.DESK_PUBLIC_URL || `http://127.0.0.1:${DESK_PORT}`,
      // A newcomer's test email is answered in seconds, not after production's 30 s wait for a
      // burst to end; the banner says the value (set REPLY_COALESCE_MS to try another).
      REPLY_COALESCE_MS: env.REPLY_COALESCE_MS || String(DEV_COALESCE_MS),
      // TICKET_PROVIDER=zendesk needs it; a dev stack keeps one of its own (.data/dev-secrets.json).
      ZENDESK_MARKER_SECRET: env.ZENDESK_MARKER_SECRET || secrets.zendeskMarkerSecret,
    };
    // The worker's /readyz says when it polls; on a port of its own so a second stack never meets it.
    const metricsPort = env.METRICS_PORT || String(await freePort());
    const startApp = (name: string, file: string, childEnv: NodeJS.ProcessEnv) => {
      const pid = group.start(name, file, childEnv);
      if (pid !== undefined) record.add(name, pid, file);
    };
    if (useSandbox) {
      startApp('sandbox', 'sandbox/main.ts', {
        ...env,
        LOG_FORMAT: appEnv.LOG_FORMAT,
        SANDBOX_PORT: String(SANDBOX_PORT),
        AGENTMAIL_API_KEY: secrets.agentmailApiKey,
        AGENTMAIL_WEBHOOK_SECRET: webhookSecret,
        SANDBOX_WEBHOOK_URL: `http://127.0.0.1:${API_PORT}/webhooks/agentmail`,
      });
    }
    // Worker Versioning: each start's build becomes current at once (no `npm run deploy -- promote` in dev).
    startApp('worker', 'worker/main.ts', { WORKER_PROMOTE_ON_START: 'true', ...appEnv, METRICS_PORT: metricsPort });
    startApp('api', 'api/main.ts', appEnv);
    startApp('desk', 'desk/main.ts', { ...appEnv, DESK_PORT: String(DESK_PORT) });

    const stopped = Promise.race([group.failed, interrupted]);
    const listening =
      (await waitForPort(API_PORT, LISTEN_TIMEOUT_MS, stopped)) &&
      (!useSandbox || (await waitForPort(SANDBOX_PORT, LISTEN_TIMEOUT_MS, stopped))) &&
      (await waitForPort(DESK_PORT, LISTEN_TIMEOUT_MS, stopped));
    // "Running" means a message sent now is answered: the worker polls its task queue.
    const polling = listening && (await waitForWorkerPolling(Number(metricsPort), POLL_TIMEOUT_MS, stopped));
    if (polling) {
      console.log(
        renderBanner(
          devBanner({
            namespace,
            taskQueue: TASK_QUEUE,
            useSandbox,
            temporalUi: temporal?.uiUrl,
            temporalAddress,
            databaseUrl,
            // The sandbox's key is a local dev secret; a real AgentMail key is never printed.
            sandboxApiKey: useSandbox ? agentmail.AGENTMAIL_API_KEY : undefined,
            ports,
            env: appEnv,
            reviewerToken,
            coalesceMs: Number(appEnv.REPLY_COALESCE_MS),
            coalesceIsDevDefault: !env.REPLY_COALESCE_MS,
          }),
        ),
      );
    } else if (!signalled && !group.failedProcess) {
      console.error(
        listening
          ? `[dev] the worker did not start polling within ${POLL_TIMEOUT_MS / 1000} s (its lines above say why)`
          : `[dev] the API did not listen on :${API_PORT} within ${LISTEN_TIMEOUT_MS / 1000} s`,
      );
    }

    await stopped;
    return group.failedProcess ? 1 : signalled ? 130 : 0;
  } finally {
    await shutdown();
    record.close();
  }
}

/** Whether the worker answers 200 on /readyz (it polls) before the timeout, or stops first. */
async function waitForWorkerPolling(port: number, timeoutMs: number, abandon: Promise<unknown>): Promise<boolean> {
  let abandoned = false;
  void abandon.then(() => (abandoned = true));
  const deadline = Date.now() + timeoutMs;
  while (!abandoned && Date.now() < deadline) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return true;
    await sleep(250);
  }
  return false;
}

async function startTemporal(
  started: (server: TemporalDevServer) => void,
  record: ProcessRecord,
  ports: DevPorts,
): Promise<TemporalDevServer> {
  console.error(
    `[dev] starting the Temporal dev server on 127.0.0.1:${ports.temporal} (state: .data/temporal/dev.sqlite)…`,
  );
  const server = await startTemporalDevServer({
    port: ports.temporal,
    uiPort: ports.temporalUi,
    dbFilename: path.join(DATA, 'temporal', 'dev.sqlite'),
    logFile: path.join(DATA, 'temporal', 'dev.log'),
  });
  started(server);
  record.add('temporal', server.pid, 'start-dev');
  return server;
}

async function localDatabase(): Promise<string> {
  const { adminUrl } = await ensureLocalPostgres();
  await ensureDatabase(adminUrl, 'replyonce');
  return DEFAULT_DEV_DATABASE_URL;
}

if (require.main === module) {
  runMain(main);
}

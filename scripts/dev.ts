// `npm run dev`: the whole system on this machine, after scripts/setup.sh.
//
//   Temporal dev server   127.0.0.1:7233, Web UI :8233, state in .data/temporal/dev.sqlite   (unless TEMPORAL_ADDRESS)
//   PostgreSQL            the local cluster on 127.0.0.1:55432, database `replyonce`           (unless DATABASE_URL)
//   sandbox               the local AgentMail stand-in on :4010                                (unless AGENTMAIL_API_KEY)
//   worker, api           the app, the API on :3000
//   desk                  the review desk on :3300 (a first reviewer's token printed once)
//
// Ctrl-C stops everything it started, the API first and Temporal last.
import path from 'node:path';
import { loadTemporalConfig } from '../lib/config';
import { migrateDatabase } from './db-migrate';
import { setupTemporal } from './temporal-setup';
import { deskBannerLines, firstReviewerToken } from './services/desk';
import { loadDevSecrets } from './services/dev-secrets';
import { runMain } from './services/main';
import { assertPortFree, waitForPort } from './services/ports';
import { DEFAULT_DEV_DATABASE_URL, ensureDatabase, ensureLocalPostgres } from './services/postgres';
import { ProcessRecord } from './services/orphans';
import { ProcessGroup } from './services/processes';
import { startTemporalDevServer, type TemporalDevServer } from './services/temporal-dev-server';

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data');
const API_PORT = 3000;
const DESK_PORT = 3300;
const SANDBOX_PORT = 4010;
const TEMPORAL_PORT = 7233;
const TEMPORAL_UI_PORT = 8233;
const TASK_QUEUE = 'replyonce';
const SANDBOX_INBOX = 'support@sandbox.agentmail.local';
/** tsx compiles on first start; on a slow machine the API takes a while to listen. */
const LISTEN_TIMEOUT_MS = 60_000;

async function main(): Promise<number> {
  const env = process.env;
  const namespace = env.TEMPORAL_NAMESPACE || 'replyonce';
  const useSandbox = !env.AGENTMAIL_API_KEY;
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
    const portHint = 'Is another `npm run dev` running?';
    await assertPortFree(API_PORT, 'API', portHint);
    await assertPortFree(DESK_PORT, 'review desk', portHint);
    if (useSandbox) await assertPortFree(SANDBOX_PORT, 'sandbox', portHint);

    const temporalAddress =
      env.TEMPORAL_ADDRESS || (await startTemporal((server) => (temporal = server), record)).address;
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
      DESK_PUBLIC_URL: env.DESK_PUBLIC_URL || `http://127.0.0.1:${DESK_PORT}`,
    };
    const startApp = (name: string, file: string, childEnv: NodeJS.ProcessEnv) => {
      const pid = group.start(name, file, childEnv);
      if (pid !== undefined) record.add(name, pid, file);
    };
    if (useSandbox) {
      startApp('sandbox', 'sandbox/main.ts', {
        ...env,
        SANDBOX_PORT: String(SANDBOX_PORT),
        AGENTMAIL_API_KEY: secrets.agentmailApiKey,
        AGENTMAIL_WEBHOOK_SECRET: webhookSecret,
        SANDBOX_WEBHOOK_URL: `http://127.0.0.1:${API_PORT}/webhooks/agentmail`,
      });
    }
    startApp('worker', 'worker/main.ts', appEnv);
    startApp('api', 'api/main.ts', appEnv);
    startApp('desk', 'desk/main.ts', { ...appEnv, DESK_PORT: String(DESK_PORT) });

    const stopped = Promise.race([group.failed, interrupted]);
    const listening =
      (await waitForPort(API_PORT, LISTEN_TIMEOUT_MS, stopped)) &&
      (!useSandbox || (await waitForPort(SANDBOX_PORT, LISTEN_TIMEOUT_MS, stopped))) &&
      (await waitForPort(DESK_PORT, LISTEN_TIMEOUT_MS, stopped));
    if (listening) {
      printBanner({
        namespace,
        useSandbox,
        temporalUi: temporal?.uiUrl,
        temporalAddress,
        databaseUrl,
        // The sandbox's key is a local dev secret; a real AgentMail key is never printed.
        agentmailApiKey: useSandbox ? agentmail.AGENTMAIL_API_KEY : undefined,
        agentmailBaseUrl: agentmail.AGENTMAIL_BASE_URL,
        env: appEnv,
        reviewerToken,
      });
    } else if (!signalled && !group.failedProcess)
      console.error(`[dev] the API did not listen on :${API_PORT} within ${LISTEN_TIMEOUT_MS / 1000} s`);

    await stopped;
    return group.failedProcess ? 1 : signalled ? 130 : 0;
  } finally {
    await shutdown();
    record.close();
  }
}

async function startTemporal(
  started: (server: TemporalDevServer) => void,
  record: ProcessRecord,
): Promise<TemporalDevServer> {
  console.error(
    `[dev] starting the Temporal dev server on 127.0.0.1:${TEMPORAL_PORT} (state: .data/temporal/dev.sqlite)…`,
  );
  const server = await startTemporalDevServer({
    port: TEMPORAL_PORT,
    uiPort: TEMPORAL_UI_PORT,
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

function printBanner(options: {
  namespace: string;
  useSandbox: boolean;
  temporalUi: string | undefined;
  temporalAddress: string;
  databaseUrl: string;
  agentmailApiKey: string | undefined;
  agentmailBaseUrl: string | undefined;
  env: NodeJS.ProcessEnv;
  reviewerToken: string | null;
}): void {
  const inbound = JSON.stringify({
    inbox_id: SANDBOX_INBOX,
    from: 'customer@example.com',
    subject: 'Hello',
    text: 'Where is my order?',
  });
  const lines = [
    '',
    'replyonce is running (Ctrl-C stops everything)',
    `  API           http://127.0.0.1:${API_PORT}`,
    ...deskBannerLines(`http://127.0.0.1:${DESK_PORT}`, options.reviewerToken),
    options.temporalUi
      ? `  Temporal UI   ${options.temporalUi}/namespaces/${options.namespace}/workflows`
      : `  Temporal      ${options.temporalAddress} (namespace ${options.namespace})`,
  ];
  if (options.useSandbox) {
    lines.push(
      `  Sandbox       http://127.0.0.1:${SANDBOX_PORT}/_sandbox  (the local AgentMail: its controls)`,
      `  Outbox        http://127.0.0.1:${SANDBOX_PORT}/_sandbox/outbox  (the replies we sent)`,
      '',
      'Send a test email through the sandbox:',
      `  curl -sS -X POST http://127.0.0.1:${SANDBOX_PORT}/_sandbox/inbound -H 'content-type: application/json' -d '${inbound}'`,
    );
  } else {
    lines.push('  AgentMail     the real API (AGENTMAIL_API_KEY is set); send an email to your inbox');
  }
  const env = options.env;
  const on = (flag: boolean, text: string) => (flag ? text : `${text} (off)`);
  lines.push(
    '',
    'Features:',
    `  drafting      ${env.DRAFT_PROVIDER || 'offline'}${env.DRAFT_MODEL ? ` (${env.DRAFT_MODEL})` : ' (deterministic, no model; DRAFT_PROVIDER picks one)'}`,
    `  tickets       ${env.TICKET_PROVIDER || 'postgres'}`,
    `  approval      ${env.APPROVAL_REQUIRED_INBOXES ? `inboxes ${env.APPROVAL_REQUIRED_INBOXES}` : 'none (APPROVAL_REQUIRED_INBOXES)'}`,
    `  admin routes  ${on(Boolean(env.ADMIN_TOKEN), '/admin/* with ADMIN_TOKEN')}`,
    `  watchdog      ${on(env.WATCHDOG_REENABLE === 'true', 're-enables a disabled webhook (WATCHDOG_REENABLE)')}`,
    '',
    'Operator commands against this stack (another terminal):',
    `  npm run temporal -- workflow list --query 'ReplyStatus = "sent"'`,
    `  DATABASE_URL='${options.databaseUrl}' AGENTMAIL_API_KEY=${options.agentmailApiKey ? `'${options.agentmailApiKey}'` : '"$AGENTMAIL_API_KEY"'}${
      options.agentmailBaseUrl ? ` AGENTMAIL_BASE_URL='${options.agentmailBaseUrl}'` : ''
    } \\`,
    `    TEMPORAL_ADDRESS='${options.temporalAddress}' TEMPORAL_NAMESPACE='${options.namespace}' npm run replay -- --all`,
  );
  console.log(`${lines.join('\n')}\n`);
}

if (require.main === module) {
  runMain(main);
}

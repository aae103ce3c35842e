// `npm run stack`: the production topology on this machine, without Docker (after scripts/setup.sh).
//
//   PostgreSQL     the local cluster on 127.0.0.1:55432: roles `temporal` (databases temporal_stack,
//                  temporal_stack_visibility) and `replyonce_app` (database replyonce_stack), apart
//   Temporal       its own server (built once from the Go module proxy, cached in ~/.cache/replyonce/bin),
//                  schemas by temporal-sql-tool, mTLS on the frontend 127.0.0.1:17233, certificates
//                  from deploy/tls/generate-certs.sh in .data/stack/certs
//   Web UI         the UI server on :18080, connected with its own client certificate
//   sandbox        the local AgentMail on :4011, delivering webhooks to the load balancer
//   api-1, api-2   two ingress replicas behind a round-robin balancer on :3100
//   worker-1, -2   two workers; every app process connects through envconfig with mTLS
//
// The server configuration, dynamic config and schema steps are deploy/'s, the files docker-compose.yml
// mounts. Ctrl-C stops everything, the app first and Temporal last.
import path from 'node:path';
import { migrateDatabase } from './db-migrate';
import { loadDevSecrets } from './services/dev-secrets';
import { runMain } from './services/main';
import { ProcessRecord } from './services/orphans';
import { assertPortFree, waitForPort } from './services/ports';
import { ProcessGroup } from './services/processes';
import { startRoundRobin, type RoundRobin } from './services/round-robin';
import { deskBannerLines, firstReviewerToken } from './services/desk';
import { startTemporalStack, type TemporalStack } from './services/temporal-stack';

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, '.data', 'stack');
const PORTS = {
  temporal: 17233,
  ui: 18080,
  balancer: 3100,
  api: [3101, 3102],
  sandbox: 4011,
  metrics: [9471, 9472],
  desk: 3301,
};
const TASK_QUEUE = 'replyonce';
const SANDBOX_INBOX = 'support@sandbox.agentmail.local';
const LISTEN_TIMEOUT_MS = 60_000;

async function main(): Promise<number> {
  const started = Date.now();
  const secrets = loadDevSecrets(path.join(DATA, 'secrets.json'));
  const group = new ProcessGroup(ROOT, ['sandbox', 'worker-1', 'worker-2', 'api-1', 'api-2', 'desk']);
  let stack: TemporalStack | undefined;
  let balancer: RoundRobin | undefined;
  let signalled = false;
  const interrupted = new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      process.on(signal, () => {
        if (signalled) return;
        signalled = true;
        console.error(`\n[stack] ${signal}: stopping…`);
        resolve();
      });
    }
  });
  const record = await ProcessRecord.open(path.join(DATA, 'processes.json'), '`npm run stack`');
  try {
    const hint = 'Is another `npm run stack` running?';
    for (const [what, port] of [
      ['Temporal', PORTS.temporal],
      ['Web UI', PORTS.ui],
      ['load balancer', PORTS.balancer],
      ['sandbox', PORTS.sandbox],
      ['review desk', PORTS.desk],
      ...PORTS.api.map((port, i) => [`api-${i + 1}`, port] as const),
    ] as const) {
      await assertPortFree(port, what, hint);
    }
    stack = await startTemporalStack({ dataDir: DATA, name: 'stack', frontendPort: PORTS.temporal, uiPort: PORTS.ui });
    if (signalled) return 130;
    await migrateDatabase(stack.appDatabaseUrl);
    const reviewerToken = await firstReviewerToken(stack.appDatabaseUrl);

    // The app's processes get Temporal's connection from the stack alone, not from this shell.
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TEMPORAL_')));
    const appEnv: NodeJS.ProcessEnv = {
      ...inherited,
      ...stack.clientEnv,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      DATABASE_URL: stack.appDatabaseUrl,
      AGENTMAIL_API_KEY: secrets.agentmailApiKey,
      AGENTMAIL_BASE_URL: `http://127.0.0.1:${PORTS.sandbox}`,
      AGENTMAIL_WEBHOOK_SECRET: secrets.agentmailWebhookSecret,
      // The webhook the sandbox posts to: the watchdog watches and re-enables that one only.
      PUBLIC_WEBHOOK_URL: `http://127.0.0.1:${PORTS.balancer}/webhooks/agentmail`,
      DESK_PUBLIC_URL: `http://127.0.0.1:${PORTS.desk}`,
    };
    const startApp = (name: string, file: string, env: NodeJS.ProcessEnv) => {
      const pid = group.start(name, file, env);
      if (pid !== undefined) record.add(name, pid, file);
    };
    startApp('sandbox', 'sandbox/main.ts', {
      ...inherited,
      SANDBOX_PORT: String(PORTS.sandbox),
      AGENTMAIL_API_KEY: secrets.agentmailApiKey,
      AGENTMAIL_WEBHOOK_SECRET: secrets.agentmailWebhookSecret,
      SANDBOX_WEBHOOK_URL: `http://127.0.0.1:${PORTS.balancer}/webhooks/agentmail`,
    });
    PORTS.metrics.forEach((port, i) =>
      // A local stack promotes the build it starts; a real one is promoted with `npm run deploy -- promote`.
      startApp(`worker-${i + 1}`, 'worker/main.ts', {
        WORKER_PROMOTE_ON_START: 'true',
        ...appEnv,
        METRICS_PORT: String(port),
      }),
    );
    PORTS.api.forEach((port, i) => startApp(`api-${i + 1}`, 'api/main.ts', { ...appEnv, PORT: String(port) }));
    startApp('desk', 'desk/main.ts', { ...appEnv, DESK_PORT: String(PORTS.desk) });
    balancer = await startRoundRobin(PORTS.balancer, PORTS.api);

    const stopped = Promise.race([group.failed, interrupted]);
    let listening = true;
    for (const port of [...PORTS.api, PORTS.sandbox, PORTS.desk]) {
      listening &&= await waitForPort(port, LISTEN_TIMEOUT_MS, stopped);
    }
    if (listening) printBanner(stack, Date.now() - started, reviewerToken);
    await stopped;
    return group.failedProcess ? 1 : signalled ? 130 : 0;
  } finally {
    await group.stopAll();
    await balancer?.close();
    if (stack) {
      console.error('[stack] stopping the Web UI and the Temporal server…');
      await stack.stop();
    }
    record.close();
  }
}

function printBanner(stack: TemporalStack, ms: number, reviewerToken: string | null): void {
  const inbound = JSON.stringify({
    inbox_id: SANDBOX_INBOX,
    from: 'customer@example.com',
    subject: 'Hello',
    text: 'Where is my order?',
  });
  const env = Object.entries(stack.clientEnv)
    .map(([name, value]) => `    export ${name}=${value}`)
    .join('\n');
  console.log(
    [
      '',
      `the production topology is running (${Math.round(ms / 1000)} s; Ctrl-C stops everything)`,
      `  API (balancer)  http://127.0.0.1:${PORTS.balancer}  → api-1 :${PORTS.api[0]}, api-2 :${PORTS.api[1]}`,
      `  Temporal        ${stack.address}  (mTLS; namespace ${stack.namespace}; logs in .data/stack/logs)`,
      `  Web UI          ${stack.uiUrl}/namespaces/${stack.namespace}/workflows`,
      ...deskBannerLines(`http://127.0.0.1:${PORTS.desk}`, reviewerToken, '  Review desk     ', stack.appDatabaseUrl),
      `  Sandbox         http://127.0.0.1:${PORTS.sandbox}  (the local AgentMail)`,
      `  Postgres        app: ${stack.appDatabaseUrl.replace(/:[^:@/]+@/, ':***@')}  (role replyonce_app; Temporal has its own)`,
      '',
      'Send a test email through the sandbox:',
      `  curl -sS -X POST http://127.0.0.1:${PORTS.sandbox}/_sandbox/inbound -H 'content-type: application/json' -d '${inbound}'`,
      '',
      'The temporal CLI against this server (the same variables the app uses):',
      env,
      '    npm run temporal -- workflow list --query \'ReplyStatus = "sent"\'  # the CLI is not on PATH: this runs it',
      '',
    ].join('\n'),
  );
}

if (require.main === module) {
  runMain(main);
}

import { DEFAULT_DEV_DATABASE_URL } from './postgres';

/**
 * The banner `npm run dev` prints once the stack answers: addresses, the optional features, and
 * commands to paste into another terminal. The banner is data: each command is a line of its own
 * (`command`), so test/dev-banner.test.ts runs every one of them exactly as printed and checks it
 * exits 0. A command therefore carries whatever it needs in front of it (the database, the
 * sandbox and its key, Temporal), with no placeholder to fill in.
 */

export type BannerLine = { text: string } | { command: string; note?: string };

export interface DevPorts {
  api: number;
  sandbox: number;
  temporal: number;
  temporalUi: number;
  desk: number;
}

/** The defaults `npm run temporal` and `npm run reviewer -- --dev` assume. */
export const DEV_DEFAULTS = {
  temporalAddress: '127.0.0.1:7233',
  namespace: 'replyonce',
  taskQueue: 'replyonce',
} as const;

export const SANDBOX_INBOX = 'support@sandbox.agentmail.local';

export interface DevBannerOptions {
  namespace: string;
  taskQueue: string;
  /** True: the local AgentMail sandbox; false: the real API (its key is never printed). */
  useSandbox: boolean;
  temporalUi: string | undefined;
  temporalAddress: string;
  databaseUrl: string;
  /** The sandbox's key (a local dev secret), filled into the commands that read AgentMail. */
  sandboxApiKey: string | undefined;
  ports: DevPorts;
  /** The environment the app processes run with (what features are on). */
  env: NodeJS.ProcessEnv;
  /** A first reviewer's token, shown once; null when reviewers exist already. */
  reviewerToken: string | null;
  /** REPLY_COALESCE_MS as the worker runs with it. */
  coalesceMs: number;
  /** True when it is `npm run dev`'s own default (REPLY_COALESCE_MS unset). */
  coalesceIsDevDefault?: boolean;
}

/** A shell word in single quotes. */
const quote = (value: string): string => `'${value.replace(/'/g, `'\\''`)}'`;
const assignments = (vars: Array<[string, string]>): string =>
  vars.map(([name, value]) => `${name}=${quote(value)} `).join('');

export function devBanner(options: DevBannerOptions): BannerLine[] {
  const text = (value: string): BannerLine => ({ text: value });
  const { ports, env } = options;
  const deskUrl = `http://127.0.0.1:${ports.desk}`;
  // `npm run temporal` assumes 127.0.0.1:7233 and the namespace replyonce: said when they moved.
  const temporalVars: Array<[string, string]> = [
    ...(options.temporalAddress !== DEV_DEFAULTS.temporalAddress
      ? [['TEMPORAL_ADDRESS', options.temporalAddress] as [string, string]]
      : []),
    ...(options.namespace !== DEV_DEFAULTS.namespace
      ? [['TEMPORAL_NAMESPACE', options.namespace] as [string, string]]
      : []),
  ];
  const cli = `${assignments(temporalVars)}npm run temporal -- `;
  const databaseVars: Array<[string, string]> =
    options.databaseUrl !== DEFAULT_DEV_DATABASE_URL ? [['DATABASE_URL', options.databaseUrl]] : [];
  // The catch-up reads AgentMail (the sandbox, with its key) and hands rows to this stack's relay.
  const replayVars = `${assignments([
    ['DATABASE_URL', options.databaseUrl],
    ...temporalVars,
    ...(options.taskQueue !== DEV_DEFAULTS.taskQueue
      ? [['TEMPORAL_TASK_QUEUE', options.taskQueue] as [string, string]]
      : []),
    ...(options.useSandbox && options.sandboxApiKey
      ? ([
          ['AGENTMAIL_BASE_URL', `http://127.0.0.1:${ports.sandbox}`],
          ['AGENTMAIL_API_KEY', options.sandboxApiKey],
        ] as Array<[string, string]>)
      : []),
  ])}${options.useSandbox ? '' : 'AGENTMAIL_API_KEY="$AGENTMAIL_API_KEY" '}`;
  const coalesce = Math.round(options.coalesceMs / 1000);
  const on = (flag: boolean, value: string) => (flag ? value : `${value} (off)`);

  const lines: BannerLine[] = [
    text(''),
    text('replyonce is running (Ctrl-C stops everything)'),
    text(`  API           http://127.0.0.1:${ports.api}`),
    text(`  Review desk   ${deskUrl}   (reviewers approve, edit and reject replies here)`),
    text(
      options.reviewerToken
        ? `                sign in with this reviewer token (shown once, only its hash is kept): ${options.reviewerToken}`
        : '                reviewers exist already; another one (the token is printed once):',
    ),
    ...(options.reviewerToken
      ? []
      : [{ command: `${assignments(databaseVars)}npm run reviewer -- --dev add --name "New reviewer"` }]),
    text(
      options.temporalUi
        ? `  Temporal UI   ${options.temporalUi}/namespaces/${options.namespace}/workflows`
        : `  Temporal      ${options.temporalAddress} (namespace ${options.namespace})`,
    ),
  ];
  if (options.useSandbox) {
    const inbound = JSON.stringify({
      inbox_id: SANDBOX_INBOX,
      from: 'customer@example.com',
      subject: 'Hello',
      text: 'Where is my order?',
    });
    lines.push(
      text(`  Sandbox       http://127.0.0.1:${ports.sandbox}/_sandbox  (the local AgentMail: its controls)`),
      text(`  Outbox        http://127.0.0.1:${ports.sandbox}/_sandbox/outbox  (the replies we sent)`),
      text(
        "  (the sandbox's mailbox lives in memory: a restart of `npm run dev` empties it; Temporal's history and Postgres stay in .data/)",
      ),
      text(''),
      text('Send a test email through the sandbox:'),
      {
        command: `curl -fsS -X POST http://127.0.0.1:${ports.sandbox}/_sandbox/inbound -H 'content-type: application/json' -d '${inbound}'`,
      },
    );
  } else {
    lines.push(text('  AgentMail     the real API (AGENTMAIL_API_KEY is set); send an email to your inbox'));
  }
  lines.push(
    text(
      coalesce > 0
        ? `  The reply comes about ${coalesce} s after the email: a thread's turn waits REPLY_COALESCE_MS (${coalesce} s here) for the customer's burst to end, and the worker logs the wait.`
        : '  The reply comes at once (REPLY_COALESCE_MS=0: no wait for a burst to end).',
    ),
    text(''),
    text('Features:'),
    text(
      `  drafting      ${env.DRAFT_PROVIDER || 'offline'}${env.DRAFT_MODEL ? ` (${env.DRAFT_MODEL})` : ' (deterministic, no model; DRAFT_PROVIDER picks one)'}`,
    ),
    text(
      `  knowledge     ${
        env.KNOWLEDGE_DIR || env.KNOWLEDGE_URLS
          ? `${[env.KNOWLEDGE_DIR, env.KNOWLEDGE_URLS].filter(Boolean).join(', ')} (the worker syncs it; npm run knowledge:sync loads it now)`
          : 'none (KNOWLEDGE_DIR: a folder of articles the drafts cite)'
      }`,
    ),
    text(`  tickets       ${env.TICKET_PROVIDER || 'postgres'}`),
    text(
      `  approval      ${env.APPROVAL_REQUIRED_INBOXES ? `inboxes ${env.APPROVAL_REQUIRED_INBOXES}: decide in the review desk, ${deskUrl}` : 'none (APPROVAL_REQUIRED_INBOXES)'}`,
    ),
    text(
      `  coalescing    REPLY_COALESCE_MS=${options.coalesceMs}${options.coalesceIsDevDefault ? " (npm run dev's default; 30000 elsewhere)" : ''}`,
    ),
    text(`  admin routes  ${on(Boolean(env.ADMIN_TOKEN), '/admin/* with ADMIN_TOKEN')}`),
    text(
      `  watchdog      ${on(env.WATCHDOG_REENABLE === 'true', 're-enables a disabled webhook (WATCHDOG_REENABLE)')}`,
    ),
    text(''),
    text('Operator commands against this stack (another terminal):'),
    { command: `${cli}workflow list --query 'ReplyStatus = "sent"'` },
    {
      command: `npm run ids -- --inbox ${SANDBOX_INBOX} --message '<order-42@customer.example>'`,
      note: "a message's workflow id and operation keys; any message id",
    },
    {
      command: `${replayVars}npm run replay -- --all`,
      note: 'catch-up: hands over what the webhooks missed',
    },
  );
  if (env.APPROVAL_REQUIRED_INBOXES) {
    lines.push(
      text(''),
      text(`Replies waiting for a verdict (approval is on): the review desk, ${deskUrl}, lists them; or`),
      { command: `${cli}workflow list --query 'ReplyStatus = "awaiting_approval" OR ReplyStatus = "escalated"'` },
    );
  }
  return lines;
}

/** The banner as printed: commands indented, their notes after them. */
export function renderBanner(lines: BannerLine[]): string {
  return `${lines
    .map((line) => ('text' in line ? line.text : `  ${line.command}${line.note ? `   (${line.note})` : ''}`))
    .join('\n')}\n`;
}

/** Every command the banner prints, exactly as printed. */
export const bannerCommands = (lines: BannerLine[]): string[] =>
  lines.flatMap((line) => ('command' in line ? [line.command] : []));

import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Client } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import type { DraftAnswer, Drafter, DraftOptions, DraftRequest } from '../../activities/draft/drafting/drafter';
import { OfflineDrafter } from '../../activities/draft/drafting/offline-drafter';
import { PostgresTickets } from '../../activities/ticket/postgres-tickets';
import type { TicketProvider } from '../../activities/ticket/ticket-provider';
import { buildApp } from '../../api/app';
import { createAgentMailClient, type AgentMailClient } from '../../lib/agentmail';
import { activityConfig, type ActivityConfig } from '../../lib/config';
import { createDb, type Db } from '../../lib/db';
import { inboundWorkflowId } from '../../lib/hashing';
import type { InboundMessageResult, MessageRef } from '../../contract';
import { createLogger } from '../../lib/logger';
import { connectTemporalWorker } from '../../lib/temporal-connection';
import { buildSandbox } from '../../sandbox/app';
import { SandboxControl } from '../../sandbox/control-client';
import { startMetricsServer } from '../../lib/metrics-server';
import { createReplyonceWorker } from '../../worker/create-worker';
import { promoteWhenPolling, workerBuildId } from '../../worker/deployment';
import { testEnv } from './env';
import { newWebhookSecret } from './signing';
import { connectClient, eventually, workflowExists } from './temporal';

/** Counts drafter calls per message: "one model call per message" is asserted on this. */
export class CountingDrafter implements Drafter {
  readonly name: string;
  private readonly counts = new Map<string, number>();

  /** Wraps the offline drafter, or the drafter a test passes (e.g. a model behind a stand-in). */
  constructor(private readonly inner: Drafter = new OfflineDrafter()) {
    this.name = inner.name;
  }

  async draft(request: DraftRequest, options?: DraftOptions): Promise<DraftAnswer> {
    const key = `${request.inboxId}/${request.messageId}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    return this.inner.draft(request, options);
  }

  instructionsFor(inboxId: string): string | undefined {
    return this.inner.instructionsFor?.(inboxId);
  }

  callsFor(ref: MessageRef): number {
    return this.counts.get(`${ref.inboxId}/${ref.messageId}`) ?? 0;
  }
}

export interface HarnessOptions {
  /** Serve /admin/* on the harness's API with this bearer token. */
  adminToken?: string;
  /** REVIEW_PROXY_USER_HEADER for the harness's API (a trusted proxy names the reviewer). */
  reviewProxyUserHeader?: string;
  /** REVIEW_PROXY_SECRET: what the proxy adds as x-replyonce-proxy-secret. */
  reviewProxySecret?: string;
  /** Any other activity settings (lib/config.ts `activityVars`), over the ones the options above set. */
  activityConfig?: Partial<ActivityConfig>;
  /** The drafter behind the counting one (default: the offline drafter). */
  drafter?: Drafter;
  /** KNOWLEDGE_INBOX_COLLECTIONS: inbox → the knowledge collections it may use (default: `default` only). */
  knowledgeInboxCollections?: Record<string, string[]>;
  /** HANDOFF: where a hand-off goes in an inbox that needs no approval (default: ticket). */
  handoff?: 'review' | 'ticket';
  /** The ticket provider (default: tickets in Postgres). */
  tickets?: TicketProvider;
  ownAddresses?: string[];
  /** REPLYONCE_INBOXES: the only inboxes answered (default: all). */
  allowedInboxes?: string[];
  replyBudgetPerSender?: number;
  replyCeilingPerInboxPerHour?: number;
  replyMaxAgeMs?: number;
  ticketForSkipped?: boolean;
  /** TICKET_FOR_ROBOTS: robots, lists and bounces get a ticket under TICKET_FOR_SKIPPED too. */
  ticketForRobots?: boolean;
  approvalInboxes?: string[];
  approvalTimeoutMs?: number;
  reconcileAfterMs?: number;
  leaseMs?: number;
  /** REPLY_COALESCE_MS: how long a thread's burst may go on before it is answered (default here: 0, at once). */
  coalesceMs?: number;
  /** The webhook watchdog re-enables a disabled webhook and catches up (WATCHDOG_REENABLE). */
  webhookReenable?: boolean;
  /** The AgentMail client's per-request timeout (s); short in tests of timeouts and "in progress" answers. */
  agentmailTimeoutSeconds?: number;
  /** false: no in-process worker (a test runs worker processes of its own, e.g. to kill them). */
  worker?: boolean;
  /** false: the harness's API runs no intake relay (a test shows what another process's relay does). */
  relay?: boolean;
}

/**
 * The whole path in one test process, on real parts: the sandbox (AgentMail's contract over
 * real HTTP), the ingress on a real port, a worker on its own task queue, the suite's real
 * Temporal server and Postgres. The sandbox delivers signed webhooks to the ingress.
 */
export class Harness {
  readonly inboxDomain = 'sandbox.agentmail.local';

  private constructor(
    readonly sandbox: SandboxControl,
    readonly sandboxUrl: string,
    readonly apiUrl: string,
    readonly webhookSecret: string,
    readonly apiKey: string,
    readonly client: Client,
    readonly db: Db,
    readonly agentmail: AgentMailClient,
    readonly drafter: CountingDrafter,
    readonly taskQueue: string,
    /** The harness API's /metrics, on a loopback listener of its own as api/main.ts serves it. */
    readonly metricsUrl: string,
    /** Worker Versioning: a deployment of its own per harness, so tests never route each other's runs. */
    readonly deploymentName: string,
    private readonly closers: Array<() => Promise<unknown>>,
  ) {}

  static async start(options: HarnessOptions = {}): Promise<Harness> {
    installQuietRuntime();
    const closers: Array<() => Promise<unknown>> = [];
    const webhookSecret = newWebhookSecret();
    const apiKey = `am_test_${randomUUID()}`;
    const taskQueue = `test-${randomUUID()}`;
    const deploymentName = `replyonce-test-${randomUUID().slice(0, 8)}`;
    const db = createDb(testEnv.databaseUrl);
    closers.unshift(() => db.end());

    const sandbox = buildSandbox({ apiKey, webhookSecret, retryScheduleMs: [0, 200, 500, 1000, 2000] });
    const sandboxUrl = await listen(sandbox.app);
    closers.unshift(() => sandbox.app.close());

    const { client, connection } = await connectClient();
    closers.unshift(() => connection.close());
    const agentmail = createAgentMailClient({
      apiKey,
      baseUrl: sandboxUrl,
      timeoutSeconds: options.agentmailTimeoutSeconds ?? 5,
    });
    const admin = options.adminToken ? { token: options.adminToken, agentmail, operationRetentionDays: 90 } : undefined;
    const api = buildApp({
      db,
      temporal: client,
      taskQueue,
      webhookSecret,
      deadlineMs: 5_000,
      bodyLimitBytes: 1_048_576,
      logger: createLogger('test-api', process.env.TEST_LOG_LEVEL ?? 'silent'),
      admin,
      reviewProxyUserHeader: options.reviewProxyUserHeader,
      reviewProxySecret: options.reviewProxySecret,
      intake: { relay: options.relay },
    });
    const apiUrl = await listen(api);
    closers.unshift(() => api.close());

    const metricsServer = await startMetricsServer({ port: 0, host: '127.0.0.1', fallbackToFreePort: true });
    closers.unshift(() => metricsServer.close());

    const control = new SandboxControl(sandboxUrl);
    await control.setWebhook({ url: `${apiUrl}/webhooks/agentmail` });

    const drafter = new CountingDrafter(options.drafter);
    const harness = () =>
      new Harness(
        control,
        sandboxUrl,
        apiUrl,
        webhookSecret,
        apiKey,
        client,
        db,
        agentmail,
        drafter,
        taskQueue,
        metricsServer.url,
        deploymentName,
        closers,
      );
    if (options.worker === false) return harness();
    const workerConnection = await connectTemporalWorker(testEnv.temporal);
    const worker = await createReplyonceWorker({
      connection: workerConnection,
      namespace: testEnv.namespace,
      taskQueue,
      workflowBundlePath: testEnv.workflowBundle,
      deployment: { deploymentName, buildId: workerBuildId() },
      deps: {
        db,
        agentmail,
        drafter,
        tickets: options.tickets ?? new PostgresTickets(db),
        config: activityConfig({
          REPLYONCE_OWN_ADDRESSES: options.ownAddresses ?? [],
          REPLYONCE_INBOXES: options.allowedInboxes ?? [],
          REPLY_BUDGET_PER_SENDER: options.replyBudgetPerSender ?? 5,
          ...(options.replyCeilingPerInboxPerHour === undefined
            ? {}
            : { REPLY_CEILING_PER_INBOX_PER_HOUR: options.replyCeilingPerInboxPerHour }),
          ...(options.replyMaxAgeMs === undefined ? {} : { REPLY_MAX_AGE: options.replyMaxAgeMs }),
          TICKET_FOR_SKIPPED: options.ticketForSkipped ?? true,
          TICKET_FOR_ROBOTS: options.ticketForRobots ?? false,
          APPROVAL_REQUIRED_INBOXES: options.approvalInboxes ?? [],
          APPROVAL_TIMEOUT_MS: options.approvalTimeoutMs ?? 60_000,
          SEND_RECONCILE_AFTER_MS: options.reconcileAfterMs ?? 23 * 60 * 60 * 1000,
          OPERATION_LEASE_MS: options.leaseMs ?? 5_000,
          REPLY_COALESCE_MS: options.coalesceMs ?? 0,
          WATCHDOG_REENABLE: options.webhookReenable ?? false,
          PUBLIC_WEBHOOK_URL: `${apiUrl}/webhooks/agentmail`,
          KNOWLEDGE_INBOX_COLLECTIONS: options.knowledgeInboxCollections ?? {},
          ...(options.handoff === undefined ? {} : { HANDOFF: options.handoff }),
          ...options.activityConfig,
        }),
      },
    });
    const running = worker.run();
    closers.unshift(async () => {
      worker.shutdown();
      await running;
      await workerConnection.close();
    });
    // As WORKER_PROMOTE_ON_START does for a worker process: runs started from here on reach this worker.
    await promoteWhenPolling(client, { deploymentName, buildId: workerBuildId() });
    return harness();
  }

  /** A fresh inbox per test keeps tests apart on the shared sandbox, Temporal and Postgres. */
  newInbox(name = 'support'): string {
    return `${name}-${randomUUID().slice(0, 8)}@${this.inboxDomain}`;
  }

  /** The workflow's result, once it exists (the intake starts it just after its commit, or the relay later). */
  async workflowResult(ref: MessageRef, timeoutMs = 20_000): Promise<InboundMessageResult> {
    const workflowId = inboundWorkflowId(ref);
    await eventually(
      async () => ((await workflowExists(this.client, workflowId)) ? true : undefined),
      `the workflow of ${ref.messageId} to exist`,
      timeoutMs,
    );
    return this.client.workflow.getHandle(workflowId).result();
  }

  /** The sandbox delivers webhooks asynchronously: wait until the intake started the workflow, then for its result. */
  async resultOf(ref: MessageRef, timeoutMs = 20_000): Promise<InboundMessageResult> {
    await waitForStart(this, ref, timeoutMs);
    return this.workflowResult(ref);
  }

  /** The message's intake row, or undefined when it was never handed over. */
  async intakeRow(ref: MessageRef): Promise<IntakeRow | undefined> {
    return (
      await this.db.query<IntakeRow>(
        'SELECT started_at, attempts, first_event_id, last_start_error FROM intake WHERE workflow_id = $1',
        [inboundWorkflowId(ref)],
      )
    ).rows[0];
  }

  /**
   * The tickets this message opened (its thread's, when it was the thread's first), each with its
   * note followed by this message's notes on it (a skip's reason, a hand-off, a held draft) and our
   * reply's header (the articles it cites).
   */
  async ticketsFor(ref: MessageRef): Promise<Array<{ ticket_id: string; note: string }>> {
    return (
      await this.db.query(
        `SELECT t.ticket_id,
                concat_ws(E'\n', t.note,
                  (SELECT string_agg(c.note, E'\n' ORDER BY c.created_at) FROM ticket_comments c
                    WHERE c.ticket_id = t.ticket_id AND c.message_id = $2 AND c.kind IN ('note', 'reply'))) AS note
           FROM tickets t WHERE t.inbox_id = $1 AND t.message_id = $2`,
        [ref.inboxId, ref.messageId],
      )
    ).rows;
  }

  async close(): Promise<void> {
    for (const close of this.closers) await close().catch(() => undefined);
  }
}

export interface IntakeRow {
  started_at: Date | null;
  attempts: number;
  first_event_id: string | null;
  last_start_error: string | null;
}

/** The intake hands a message over asynchronously: waits until its row says the workflow was started. */
export async function waitForStart(h: Harness, ref: MessageRef, timeoutMs = 20_000): Promise<void> {
  await eventually(
    async () => ((await h.intakeRow(ref))?.started_at ? true : undefined),
    `the intake to start the workflow of ${ref.messageId}`,
    timeoutMs,
  );
}

let runtimeInstalled = false;
/** The SDK's worker logs (state changes, pollers) drown test output; warnings still show. */
function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({
    logger: new DefaultLogger((process.env.TEST_LOG_LEVEL?.toUpperCase() as 'WARN' | undefined) ?? 'WARN'),
  });
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

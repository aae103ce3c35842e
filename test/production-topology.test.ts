// The production topology on this machine (scripts/services/temporal-stack.ts, what `npm run stack`
// runs): Temporal's own server on Postgres with SQL visibility and mTLS on its frontend, the app in
// a database of its own role, two API processes behind a round-robin balancer and two worker
// processes, every one of them connected through envconfig with a client certificate. Started once
// for the file. The server binaries are built (and cached) when missing: this group never skips.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { Connection, type WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { inboundWorkflowId } from '../lib/hashing';
import type { Failpoint } from '../lib/failpoints';
import { draftKey, type MessageRef } from '../contract';
import { loadTemporalConnection } from '../lib/temporal-connection';
import { messageReceivedBody, type InboundResult } from '../sandbox/control-client';
import { migrateDatabase } from '../scripts/db-migrate';
import { dropDatabasesAsSuperuser } from '../scripts/services/postgres';
import { startRoundRobin, type RoundRobin } from '../scripts/services/round-robin';
import { startTemporalStack, type TemporalStack } from '../scripts/services/temporal-stack';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { signedHeaders } from './support/signing';
import { eventually } from './support/temporal';
import { CHROMIUM, findInWorkflowList, keepScreenshot, launchChromium } from './support/web-ui';
import { EXTRA_STEP_INTERCEPTOR } from './support/extra-step';
import { replyStatusOf, sendVerdict, waitForStatus } from './support/review';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../worker/create-worker';
import { describeDeployment, workerBuildId } from '../worker/deployment';

const ROOT = path.resolve(__dirname, '..');
const NAME = `ptest_${process.pid}`;

let stack: TemporalStack;
let h: Harness;
let balancer: RoundRobin;
let apis: Array<AppProcess & { url: string }> = [];
let workers: AppProcess[] = [];
const extra: AppProcess[] = [];
let setupSeconds = 0;

before(
  async () => {
    const t0 = Date.now();
    stack = await startTemporalStack({
      dataDir: path.join(ROOT, '.data', 'test', `stack-${process.pid}`),
      name: NAME,
      fresh: true,
      uiPort: 0,
      namespace: 'replyonce-test',
      log: (line) => console.error(`[production-topology] ${line}`),
    });
    console.error(
      `[production-topology] server binaries: ${stack.binaries.buildSeconds} s (0 when cached); stack ready in ${Math.round((Date.now() - t0) / 100) / 10} s`,
    );
    await migrateDatabase(stack.appDatabaseUrl, { log: () => undefined });
    // Everything below (the harness's clients, the processes it spawns) reads these, as the processes would.
    Object.assign(process.env, stack.clientEnv, { DATABASE_URL: stack.appDatabaseUrl });
    h = await Harness.start({ worker: false });
    workers = await Promise.all([AppProcess.startWorker(h), AppProcess.startWorker(h)]);
    apis = await Promise.all([AppProcess.startApi(h), AppProcess.startApi(h)]);
    balancer = await startRoundRobin(
      0,
      apis.map((api) => Number(new URL(api.url).port)),
    );
    await h.sandbox.setWebhook({ url: `http://127.0.0.1:${balancer.port}/webhooks/agentmail` });
    setupSeconds = (Date.now() - t0) / 1000;
    // Long enough to build the three binaries on a machine that has never built them (minutes).
  },
  { timeout: 30 * 60_000 },
);

after(async () => {
  await Promise.all([...apis, ...workers, ...extra].map((p) => p.stop()));
  await balancer?.close();
  await h?.close();
  await stack?.stop();
  await dropDatabasesAsSuperuser([`temporal_${NAME}`, `temporal_${NAME}_visibility`, `replyonce_${NAME}`]).catch(
    () => undefined,
  );
  rmSync(path.join(ROOT, '.data', 'test', `stack-${process.pid}`), { recursive: true, force: true });
});

const customerMail = (inboxId: string, extraFields: Record<string, string> = {}) => ({
  inbox_id: inboxId,
  from: `Ada <ada-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'My parcel',
  text: 'Where is it?',
  ...extraFields,
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const draftCalls = (ref: MessageRef) =>
  [...workers, ...extra].reduce((n, w) => n + w.logs('drafting reply', { operationKey: draftKey(ref) }).length, 0);

describe('the production topology (Temporal server, Postgres, mTLS, 2 APIs, 2 workers)', () => {
  test("every process reached Temporal over mTLS through envconfig; each worker's /readyz says it polls", async () => {
    for (const p of [...apis, ...workers]) {
      const started = p.logLines.find((line) => line.msg === 'api listening' || line.msg === 'worker polling');
      assert.match(String(started?.temporal), /mTLS/);
    }
    for (const worker of workers) {
      const metrics = String(worker.logs('worker polling')[0]?.metrics);
      const ready = await eventually(async () => {
        const response = await fetch(metrics.replace(/\/metrics$/, '/readyz'));
        return response.ok ? ((await response.json()) as { status: string }) : undefined;
      }, 'the worker to report that it polls');
      assert.equal(ready.status, 'polling');
    }
    assert.ok(setupSeconds > 0);
  });

  test('the whole path: a webhook through the balancer → one reply; found by MessageId and ReplyStatus in SQL visibility', async () => {
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(customerMail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    const result = await h.resultOf(ref, 60_000);
    assert.equal(result.status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    assert.equal((await h.ticketsFor(ref)).length, 1);
    const listed = await eventually(
      async () => {
        const ids: string[] = [];
        for await (const run of h.client.workflow.list({
          query: `MessageId = '${ref.messageId}' AND ReplyStatus = 'sent'`,
        }))
          ids.push(run.workflowId);
        return ids.length > 0 ? ids : undefined;
      },
      'the workflow in visibility',
      30_000,
    );
    assert.deepEqual(listed, [inboundWorkflowId(ref)]);
  });

  test('20 concurrent deliveries of one event, spread over both replicas → one run, one reply, one model call', async () => {
    const inboxId = h.newInbox();
    const inbound: InboundResult = await h.sandbox.inbound({ ...customerMail(inboxId), deliver: false });
    const ref = { inboxId, messageId: inbound.message.message_id };
    const body = messageReceivedBody(inbound, `evt_${randomUUID()}`);
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${apis[i % apis.length]!.url}/webhooks/agentmail`, {
          method: 'POST',
          body,
          headers: signedHeaders(h.webhookSecret, body),
        }).then((r) => r.status),
      ),
    );
    assert.ok(
      statuses.every((s) => s >= 200 && s < 300),
      `all 2xx: ${statuses.join(',')}`,
    );
    assert.equal((await h.workflowResult(ref)).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    assert.equal(draftCalls(ref), 1);
  });

  test('one email to three inboxes → three workflows, three replies', async () => {
    const messageId = `<${randomUUID()}@customer.example>`;
    const inboxes = [h.newInbox('sales'), h.newInbox('support'), h.newInbox('billing')];
    for (const inboxId of inboxes) await h.sandbox.inbound(customerMail(inboxId, { message_id: messageId }));
    const results = await Promise.all(inboxes.map((inboxId) => h.resultOf({ inboxId, messageId }, 60_000)));
    assert.deepEqual(
      results.map((r) => r.status),
      ['sent', 'sent', 'sent'],
    );
    for (const inboxId of inboxes) assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
  });

  test('a connection without a client certificate is refused; so is one with a certificate of another CA', async () => {
    const { clientEnv } = stack;
    const attempt = async (env: Record<string, string>) => {
      const loaded = loadTemporalConnection(env);
      assert.ok(loaded.ok, loaded.ok ? '' : loaded.problems.join('; '));
      const connection = await Connection.connect({ ...loaded.settings.connectionOptions, connectTimeout: 3_000 });
      try {
        await connection.workflowService.getSystemInfo({});
      } finally {
        await connection.close();
      }
    };
    // The control: the app's own certificate is accepted.
    await attempt(clientEnv);
    const serverOnly = {
      TEMPORAL_ADDRESS: stack.address,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: clientEnv.TEMPORAL_TLS_SERVER_CA_CERT_PATH!,
      TEMPORAL_TLS_SERVER_NAME: 'temporal',
    };
    await assert.rejects(attempt(serverOnly), 'TLS without a client certificate');
    await assert.rejects(attempt({ TEMPORAL_ADDRESS: stack.address }), 'plaintext');
    const otherCa = mkdtempSync(path.join(tmpdir(), 'replyonce-other-ca-'));
    try {
      execFileSync('sh', [path.join(ROOT, 'deploy', 'tls', 'generate-certs.sh'), otherCa]);
      await assert.rejects(
        attempt({
          ...serverOnly,
          TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(otherCa, 'app', 'client.pem'),
          TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(otherCa, 'app', 'client.key'),
        }),
        'a certificate the server does not trust',
      );
    } finally {
      rmSync(otherCa, { recursive: true, force: true });
    }
  });

  // Issue 18 point 11: the server's internal services speak internode mTLS with a CA of their own.
  test("the history port refuses plaintext, TLS without a certificate, and the app's certificate; the internode certificate is answered", async () => {
    const port = stack.internalPorts.history;
    const dir = path.join(stack.certsDir, 'temporal');
    const internodeCa = readFileSync(path.join(dir, 'internode-ca.pem'));
    const appDir = path.join(stack.certsDir, 'app');
    // The control: with the internode certificate, the history service answers HTTP/2 (gRPC).
    assert.equal(
      await http2Answer(port, {
        ca: internodeCa,
        cert: readFileSync(path.join(dir, 'internode.pem')),
        key: readFileSync(path.join(dir, 'internode.key')),
      }),
      'http2',
    );
    assert.notEqual(await http2Answer(port, null), 'http2', 'plaintext gRPC is refused');
    assert.notEqual(
      await http2Answer(port, { ca: internodeCa }),
      'http2',
      'TLS without a client certificate is refused',
    );
    assert.notEqual(
      await http2Answer(port, {
        ca: internodeCa,
        cert: readFileSync(path.join(appDir, 'client.pem')),
        key: readFileSync(path.join(appDir, 'client.key')),
      }),
      'http2',
      "the app's certificate (the frontend's CA) does not open an internode port",
    );
    for (const other of [stack.internalPorts.matching, stack.internalPorts.worker])
      assert.notEqual(await http2Answer(other, null), 'http2', `plaintext to :${other} is refused`);
  });

  test(
    'the Web UI server (its own client certificate) lists the message by MessageId and ReplyStatus in headless Chromium',
    {
      skip: existsSync(CHROMIUM) ? false : `Chromium is not installed at ${CHROMIUM} (scripts/setup.sh installs it)`,
    },
    async () => {
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound(customerMail(inboxId));
      const ref = { inboxId, messageId: inbound.message.message_id };
      assert.equal((await h.resultOf(ref, 60_000)).status, 'sent');
      const browser = await launchChromium();
      try {
        const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
        const query = `MessageId = "${ref.messageId}" AND ReplyStatus = "sent"`;
        const row = await findInWorkflowList(page, {
          uiUrl: stack.uiUrl as string,
          namespace: stack.namespace,
          query,
          workflowId: inboundWorkflowId(ref),
        });
        await keepScreenshot(page, 'production-topology-web-ui');
        assert.ok(await row.isVisible(), `the workflow is listed for ${query}`);
      } finally {
        await browser.close();
      }
    },
  );

  test('the Temporal server restarted under the running APIs and workers → they reconnect; the next message is answered once', async () => {
    await stack.restartServer();
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound(customerMail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    assert.equal((await h.resultOf(ref, 90_000)).status, 'sent');
    assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1);
    for (const p of [...apis, ...workers]) assert.equal(p.pid !== undefined && isAlive(p.pid), true, 'no process died');
  });

  // Last: they replace the workers. Each crash has a worker of its own take the task (the others are stopped).
  const crashes: Array<[Failpoint, string]> = [
    ['reply.after-effect', 'after AgentMail accepted the send, before its record'],
    ['ticket.after-effect', 'after the ticket was created, before its record'],
    ['draft.after-store', 'after the draft was stored, before the activity returned'],
  ];
  for (const [failpoint, when] of crashes) {
    test(`a worker SIGKILLed ${when} → a fresh worker resumes: one email, one ticket`, async () => {
      await Promise.all(workers.map((w) => w.stop()));
      const crashing = await AppProcess.startWorker(h, { failpoints: [failpoint] });
      extra.push(crashing);
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound(customerMail(inboxId));
      const ref = { inboxId, messageId: inbound.message.message_id };
      const died = await crashing.exited;
      assert.equal(died.signal, 'SIGKILL', `the worker died at ${failpoint}`);
      if (failpoint === 'reply.after-effect') {
        assert.equal((await h.sandbox.outbox({ inbox_id: inboxId })).length, 1, 'the crash came after the send');
      }
      workers = await Promise.all([AppProcess.startWorker(h), AppProcess.startWorker(h)]);
      const result = await h.resultOf(ref, 90_000);
      assert.equal(result.status, 'sent');
      const outbox = await h.sandbox.outbox({ inbox_id: inboxId });
      assert.equal(outbox.length, 1, 'one email despite the crash');
      assert.equal(result.status === 'sent' && result.replyMessageId, outbox[0]!.message.message_id);
      assert.equal((await h.ticketsFor(ref)).length, 1, 'one ticket despite the crash');
    });
  }
});

/**
 * Whether a gRPC server on 127.0.0.1:`port` answers an HTTP/2 client preface with its SETTINGS
 * frame ('http2'), over TLS with `tls` (null: plaintext), or what happened instead.
 */
async function http2Answer(
  port: number,
  tlsOptions: { ca: Buffer; cert?: Buffer; key?: Buffer } | null,
): Promise<string> {
  const preface = Buffer.concat([
    Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
    Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]), // an empty SETTINGS frame
  ]);
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    const socket = tlsOptions
      ? tls.connect({ host: '127.0.0.1', port, servername: 'temporal-internode', ALPNProtocols: ['h2'], ...tlsOptions })
      : net.connect({ host: '127.0.0.1', port });
    const done = (answer: string) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done('no answer within 5 s'), 5_000);
    socket.once(tlsOptions ? 'secureConnect' : 'connect', () => socket.write(preface));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 9) return;
      // A frame header: length (3), type (1; 4 = SETTINGS), flags (1), stream id (4; 0 for SETTINGS).
      done(
        received[3] === 4 && received.readUInt32BE(5) === 0
          ? 'http2'
          : `bytes ${received.subarray(0, 9).toString('hex')}`,
      );
    });
    socket.once('error', (error: NodeJS.ErrnoException) => done(`error ${error.code ?? error.message}`));
    socket.once('close', () => done('closed'));
  });
}

// Worker Versioning on Temporal's own server (docs/changing-the-workflow.md). Build A is this
// checkout's; build B is the same code with one extra step before every send (a timer, from the
// test-only interceptor test/support/extra-step.ts), a change that would wedge A's open runs
// without versioning (test/replay-histories.test.ts proves B cannot replay A's histories).
describe('a rolling deploy under Worker Versioning', () => {
  const buildA = workerBuildId();
  const buildB = `${buildA}-b`;
  const approvalInbox = `deploy-${randomUUID().slice(0, 8)}@sandbox.agentmail.local`;
  const approvalEnv = {
    APPROVAL_REQUIRED_INBOXES: approvalInbox,
    APPROVAL_TIMEOUT_MS: String(3_600_000),
    // Builds are made current by `npm run deploy` here, never by their workers' start-up.
    WORKER_PROMOTE_ON_START: 'false',
  };
  let bundleB: string;
  let aWorkers: AppProcess[] = [];
  const bWorkers: AppProcess[] = [];
  const pendingOnB: MessageRef[] = [];

  /** Tracked as soon as spawned, so a worker whose start timed out is stopped too. */
  const track = (list: AppProcess[], worker: AppProcess) => {
    list.push(worker);
    return worker.waitForLog((line) => line.msg === 'worker polling', 'the worker to poll', 60_000).then(() => worker);
  };
  const startA = () => track(aWorkers, AppProcess.spawnWorker(h, { env: { ...approvalEnv, WORKER_BUILD_ID: buildA } }));
  const startB = () =>
    track(
      bWorkers,
      AppProcess.spawnWorker(h, {
        env: {
          ...approvalEnv,
          WORKER_BUILD_ID: buildB,
          REPLYONCE_WORKFLOW_BUNDLE: bundleB,
        },
      }),
    );
  /** `npm run deploy -- …` as a person types it, against the stack. */
  const deploy = (...args: string[]) =>
    execFileSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'deploy.ts'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...stack.clientEnv, WORKER_DEPLOYMENT_NAME: h.deploymentName },
      encoding: 'utf8',
    });
  const handleOf = (ref: MessageRef): WorkflowHandle => h.client.workflow.getHandle(inboundWorkflowId(ref));
  const pinnedBuild = async (ref: MessageRef) => {
    const info = (await handleOf(ref).describe()).raw.workflowExecutionInfo?.versioningInfo;
    return info?.deploymentVersion?.buildId ?? null;
  };
  const events = async (ref: MessageRef) => (await handleOf(ref).fetchHistory()).events ?? [];
  /** B's extra step leaves a one-second timer in its runs' histories (A's only timer is the approval wait's hour). */
  const ranB = async (ref: MessageRef) =>
    (await events(ref)).some((e) => Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0) === 1);
  /**
   * Workflow tasks that failed (a non-determinism, an error in workflow code), with their causes.
   * A task that timed out on a busy worker's sticky queue and ran elsewhere is not a failure.
   */
  const failedTasks = async (ref: MessageRef) =>
    (await events(ref))
      .filter((e) => e.workflowTaskFailedEventAttributes)
      .map(
        (e) =>
          `${e.workflowTaskFailedEventAttributes?.cause}: ${e.workflowTaskFailedEventAttributes?.failure?.message}`,
      );
  /**
   * Waits until every run shows `status` for as long as they get there: fails once none has for
   * `stallMs`, saying how many did. Thirty runs on two workers took 15 s here unloaded and over 90 s
   * with the machine's two cores shared with a soak and other suites: a deadline for all thirty
   * measured the machine, a stall is what would be wrong.
   */
  const allReach = async (refs: MessageRef[], status: 'awaiting_approval', stallMs = 60_000) => {
    const reached = new Set<MessageRef>();
    for (let lastProgress = Date.now(); reached.size < refs.length;) {
      for (const ref of refs)
        if (!reached.has(ref) && (await replyStatusOf(h, ref)) === status) {
          reached.add(ref);
          lastProgress = Date.now();
        }
      if (reached.size < refs.length && Date.now() - lastProgress > stallMs)
        assert.fail(
          `${reached.size} of ${refs.length} runs reached ${status}; none more in the last ${stallMs / 1000} s`,
        );
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };
  const arrive = async (): Promise<MessageRef> => {
    const inbound = await h.sandbox.inbound(customerMail(approvalInbox));
    return { inboxId: approvalInbox, messageId: inbound.message.message_id };
  };

  before(
    async () => {
      const { code } = await bundleWorkflowCode({
        workflowsPath: require.resolve('../workflows'),
        workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES, EXTRA_STEP_INTERCEPTOR],
        logger: new DefaultLogger('WARN'),
      });
      bundleB = path.join(ROOT, '.data', 'test', `workflow-bundle-b-${process.pid}.js`);
      writeFileSync(bundleB, code);
    },
    { timeout: 120_000 },
  );
  after(async () => {
    await Promise.all([...aWorkers, ...bWorkers].map((w) => w.stop()));
    rmSync(bundleB, { force: true });
  });

  // Its waits are on progress, not on the suite's 3-minute default: on a loaded machine it takes longer.
  const rollingDeploy =
    '30 runs wait for approval on A; B becomes current; new runs start on B; the 30 complete on A with one reply each; A drains and stops; no workflow task fails';
  test(rollingDeploy, { timeout: 10 * 60_000 }, async () => {
    // The workers so far are build A too; these two also know the approval inbox.
    await Promise.all(workers.map((w) => w.stop()));
    workers = [];
    await Promise.all([startA(), startA()]);
    const onA: MessageRef[] = [];
    for (let i = 0; i < 30; i++) onA.push(await arrive());
    await allReach(onA, 'awaiting_approval');

    // Build B's workers start beside A's; B is not current yet, so they get nothing.
    await startB();
    // As an operator does: promote once `deploy status` lists B. The server lists a build at its
    // first poll, before it can describe it and before its other task queues register; the promote
    // waits for those itself (worker/deployment.ts, untilItPollsQueuesOf).
    await eventually(
      async () =>
        (await describeDeployment(h.client, h.deploymentName))?.versions.some((v) => v.buildId === buildB)
          ? true
          : undefined,
      'build B to register with the server',
    );
    assert.match(deploy('promote', buildB), new RegExp(`${buildB} is current \\(was ${buildA}\\)`));
    // The open runs are counted in visibility, which follows the runs' own state a moment later.
    let status = '';
    await eventually(
      async () => {
        status = deploy('status');
        return new RegExp(`${buildA} +DRAINING.* 30 open runs`).test(status) ? true : undefined;
      },
      `deploy status to list ${buildA} as draining with 30 open runs`,
      30_000,
    ).catch((error: unknown) => assert.fail(`${String(error)}; the last status:\n${status}`));
    assert.match(status, new RegExp(`current +${buildB}`));

    // New mail runs on B (and waits there: kept open for the rollback below).
    for (let i = 0; i < 3; i++) pendingOnB.push(await arrive());
    for (const ref of pendingOnB) {
      await waitForStatus(h, ref, 'awaiting_approval', 60_000);
      assert.equal(await pinnedBuild(ref), buildB);
    }

    // The 30 are approved after B became current: each finishes on A's code, pinned there.
    await Promise.all(onA.map((ref) => sendVerdict(handleOf(ref), 'approve')));
    const results = await Promise.all(onA.map((ref) => h.workflowResult(ref, 90_000)));
    assert.deepEqual(new Set(results.map((r) => r.status)), new Set(['sent']));
    for (const ref of onA) {
      assert.equal(await pinnedBuild(ref), buildA);
      assert.equal(await ranB(ref), false, "A's code: no extra step");
      assert.equal((await h.sandbox.outbox({ inbox_id: approvalInbox, in_reply_to: ref.messageId })).length, 1);
      assert.deepEqual(await failedTasks(ref), [], `no workflow task failed for ${ref.messageId}`);
    }
    assert.equal(
      bWorkers.reduce((n, w) => n + w.logs('drafting reply').length, 0),
      3,
      "B's worker drafted only B's runs",
    );

    // A has no open run left: its workers may go.
    await eventually(
      async () =>
        / 0 open runs/.test(
          deploy('status')
            .split('\n')
            .find((l) => l.includes(`${buildA} `)) ?? '',
        )
          ? true
          : undefined,
      'A to have no open runs',
      30_000,
    );
    await Promise.all(aWorkers.map((w) => w.stop()));
    aWorkers = [];
  });

  test("a rollback to A: new runs start on A again, B's open runs finish on B", async () => {
    assert.equal(pendingOnB.length, 3, 'the test above left three runs open on B');
    // A's workers are back first: a build whose workers are gone gets its runs only once they return.
    await startA();
    assert.match(deploy('rollback'), new RegExp(`rolled back to ${buildA} \\(was ${buildB}\\)`));
    const onA = await arrive();
    await waitForStatus(h, onA, 'awaiting_approval', 60_000);
    assert.equal(await pinnedBuild(onA), buildA);

    await Promise.all([...pendingOnB, onA].map((ref) => sendVerdict(handleOf(ref), 'approve')));
    for (const ref of pendingOnB) {
      assert.equal((await h.workflowResult(ref, 90_000)).status, 'sent');
      assert.equal(await pinnedBuild(ref), buildB);
      assert.equal(await ranB(ref), true, "B's code: its extra step before the send");
      assert.deepEqual(await failedTasks(ref), []);
      assert.equal((await h.sandbox.outbox({ inbox_id: approvalInbox, in_reply_to: ref.messageId })).length, 1);
    }
    assert.equal((await h.workflowResult(onA, 90_000)).status, 'sent');
    assert.equal(await ranB(onA), false);
    assert.deepEqual(await failedTasks(onA), []);
  });
});

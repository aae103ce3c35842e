// The production topology on this machine (scripts/services/temporal-stack.ts, what `npm run stack`
// runs): Temporal's own server on Postgres with SQL visibility and mTLS on its frontend, the app in
// a database of its own role, two API processes behind a round-robin balancer and two worker
// processes, every one of them connected through envconfig with a client certificate. Started once
// for the file. The server binaries are built (and cached) when missing: this group never skips.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';
import { Connection } from '@temporalio/client';
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

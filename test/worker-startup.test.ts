import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getPriority } from 'node:os';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { INBOUND_MESSAGE_WORKFLOW, reviewUpdate, type MessageRef } from '../contract';
import { inboundWorkflowId } from '../lib/hashing';
import { connectTemporalWorker } from '../lib/temporal-connection';
import { describeDeployment, setCurrentVersion } from '../worker/deployment';
import { unansweredQuery } from '../worker/unanswered';
import { testEnv } from './support/env';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';

// Start-up as an operator meets it: failures name their cause, and two workers share a host.
let h: Harness;
const processes: AppProcess[] = [];
before(async () => {
  h = await Harness.start({ worker: false });
});
after(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await h.close();
});

/** A port something else already listens on. */
async function occupiedPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((_request, response) => response.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** The nice value of every thread of a process (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNiceValues(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // After "pid (comm) ": state is field 3, nice field 19.
    return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16]);
  });
}

describe('worker start-up', () => {
  test('the worker yields the CPU to the API: every thread, Temporal runtime threads included, runs at WORKER_NICE (default 10); 0 leaves it', async () => {
    // Act
    const lowered = await AppProcess.startWorker(h);
    processes.push(lowered);
    const unchanged = await AppProcess.startWorker(h, { env: { WORKER_NICE: '0' } });
    processes.push(unchanged);

    // Assess: a polling worker has its Rust core and V8 threads besides the main one. A worker
    // inherits this process's nice value (0 unless the suite itself runs under `nice`).
    const inherited = getPriority();
    const loweredThreads = threadNiceValues(lowered.pid as number);
    assert.ok(loweredThreads.length > 4, `only ${loweredThreads.length} threads`);
    assert.deepEqual(new Set(loweredThreads), new Set([Math.max(10, inherited)]));
    assert.equal(lowered.logs('worker polling')[0]?.nice, Math.max(10, inherited));
    assert.deepEqual(new Set(threadNiceValues(unchanged.pid as number)), new Set([inherited]));
  });

  test('WORKER_NICE out of 0–19 stops the worker naming the variable', async () => {
    const worker = AppProcess.spawnWorker(h, { env: { WORKER_NICE: '20' } });
    processes.push(worker);
    const { code } = await worker.exited;
    assert.equal(code, 1);
    assert.match(worker.stderr, /WORKER_NICE/);
  });

  test('a METRICS_PORT that is taken stops the worker with that cause, not a connection clean-up error', async () => {
    // Prepare
    const taken = await occupiedPort();
    try {
      // Act
      const worker = AppProcess.spawnWorker(h, { env: { METRICS_PORT: String(taken.port) } });
      processes.push(worker);
      const { code } = await worker.exited;

      // Assess
      assert.equal(code, 1);
      assert.match(worker.stderr, new RegExp(`METRICS_PORT=${taken.port} on 127\\.0\\.0\\.1 is already in use`));
      assert.doesNotMatch(worker.stderr, /Cannot close connection|Workers hold a reference/);
    } finally {
      await taken.close();
    }
  });

  test('two workers on one host with METRICS_PORT unset both start; the second serves /metrics elsewhere', async () => {
    // Act: the default port (9464) is taken by the first worker, or by anything else on this host.
    const first = await AppProcess.startWorker(h, { env: { METRICS_PORT: '' } });
    processes.push(first);
    const second = await AppProcess.startWorker(h, { env: { METRICS_PORT: '' } });
    processes.push(second);

    // Assess
    const urls = [first, second].map((w) => String(w.logs('worker polling')[0]?.metrics));
    assert.notEqual(urls[0], urls[1]);
    assert.ok(
      second.logLines.some((line) => typeof line.msg === 'string' && line.msg.startsWith('metrics port 9464 is taken')),
    );
    for (const url of urls) {
      const response = await fetch(url);
      assert.equal(response.status, 200);
      assert.match(await response.text(), /replyonce_/);
    }
  });
});

describe('a first production start that answers nothing says so (issue 39)', () => {
  test('no WORKER_PROMOTE_ON_START and nothing promoted: a warning naming `npm run deploy -- promote <build>`, /readyz 503 saying why, the unanswered gauge counting the waiting message; once promoted, all clear and it is answered', async () => {
    // Prepare: a worker started as in production (plain process, WORKER_PROMOTE_ON_START unset),
    // in a deployment nobody has promoted a build of yet, on a queue of its own.
    const deploymentName = `first-start-${randomUUID().slice(0, 8)}`;
    const taskQueue = `first-start-${randomUUID()}`;
    const buildId = `first-${randomUUID().slice(0, 8)}`;
    const worker = await AppProcess.startWorker(h, {
      env: {
        WORKER_PROMOTE_ON_START: '',
        WORKER_DEPLOYMENT_NAME: deploymentName,
        WORKER_BUILD_ID: buildId,
        TEMPORAL_TASK_QUEUE: taskQueue,
      },
    });
    processes.push(worker);
    const metricsUrl = String(worker.logs('worker polling')[0]?.metrics);
    const readyzUrl = metricsUrl.replace(/\/metrics$/, '/readyz');
    // A message, started on that queue as the intake starts it.
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `first-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Anyone there?',
      text: 'Hello?',
      deliver: false,
    });
    const ref: MessageRef = { inboxId, messageId: inbound.message.message_id };
    const handle = await h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
      workflowId: inboundWorkflowId(ref),
      taskQueue,
      args: [ref],
    });

    // Assess 1: the log, /readyz and the gauge say that nothing will be answered.
    const promote = `npm run deploy -- promote ${buildId}`;
    await worker.waitForLog(
      (line) =>
        typeof line.msg === 'string' && line.msg.includes('has no current version') && line.msg.includes(promote),
      'the warning that no version is current',
    );
    const notReady = await fetch(readyzUrl);
    assert.equal(notReady.status, 503);
    const body = (await notReady.json()) as { status: string; problem?: string };
    assert.equal(body.status, 'polling');
    assert.match(body.problem ?? '', new RegExp(`${deploymentName} has no current version`));
    assert.ok(body.problem?.includes(promote), body.problem);
    const unanswered = async () =>
      Number(/^replyonce_unanswered_messages (\S+)$/m.exec(await (await fetch(metricsUrl)).text())?.[1]);
    await eventually(
      async () => ((await unanswered()) === 1 ? true : undefined),
      'the gauge to count the waiting message',
    );
    assert.equal((await handle.describe()).status.name, 'RUNNING');

    // Act: the operator runs what the warning says.
    await setCurrentVersion(h.client, { deploymentName, buildId });

    // Assess 2: healthy within seconds, the message answered, nothing left unanswered.
    await eventually(async () => ((await fetch(readyzUrl)).status === 200 ? true : undefined), '/readyz 200', 30_000);
    assert.equal((await handle.result()).status, 'sent');
    // Back to the ordinary count (runs of any queue waiting past UNANSWERED_AFTER_MS): the suite's
    // namespace is shared, so other files' leftovers may count there, but this queue's message no longer does.
    await eventually(async () => {
      const ordinary = (await h.client.workflow.count(unansweredQuery(new Date()))).count;
      return (await unanswered()) === ordinary ? true : undefined;
    }, "the gauge back to the ordinary count, without this queue's message");
  });
});

const ROOT = path.resolve(__dirname, '..');

describe('`npm run deploy -- promote` right after a build starts (the production-topology flake)', () => {
  test('a build that polls only one of its two task queues yet, while the other has work waiting, is promoted once it polls both, not refused', async () => {
    // Prepare: build A current, polling two queues (as a build of 0.1 did: the messages' and its turn keepers').
    const deploymentName = `promote-${randomUUID().slice(0, 8)}`;
    const taskQueue = `promote-${randomUUID()}`;
    const secondQueue = `${taskQueue}-second`;
    const connection = await connectTemporalWorker(testEnv.temporal);
    const running: Array<{ worker: Worker; done: Promise<void> }> = [];
    const poll = async (buildId: string, queue: string) => {
      const worker = await Worker.create({
        connection,
        namespace: testEnv.namespace,
        taskQueue: queue,
        workflowBundle: { codePath: testEnv.workflowBundle! },
        workerDeploymentOptions: {
          useWorkerVersioning: true,
          version: { deploymentName, buildId },
          defaultVersioningBehavior: 'PINNED',
        },
      });
      const entry = { worker, done: worker.run() };
      running.push(entry);
      return entry;
    };
    const queuesOf = async (buildId: string) =>
      (
        await h.client.workflowService.describeWorkerDeploymentVersion({
          namespace: testEnv.namespace,
          deploymentVersion: { deploymentName, buildId },
        })
      ).workerDeploymentVersionInfo?.taskQueueInfos?.length ?? 0;
    const ref: MessageRef = { inboxId: h.newInbox(), messageId: `<${randomUUID()}@promote.test>` };
    try {
      const aMain = await poll('build-a', taskQueue);
      await poll('build-a', secondQueue);
      await eventually(
        async () => ((await queuesOf('build-a').catch(() => 0)) === 2 ? true : undefined),
        'A to poll both queues',
      );
      await setCurrentVersion(h.client, { deploymentName, buildId: 'build-a' });
      // Work waits on the messages' queue (as right after a burst of mail): its poller is away for a moment.
      aMain.worker.shutdown();
      await aMain.done;
      await h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
        workflowId: inboundWorkflowId(ref),
        taskQueue,
        args: [ref],
      });
      // B's first worker polls: the moment the rolling-deploy test saw B "registered" and promoted it.
      await poll('build-b', secondQueue);
      await eventually(
        async () => ((await queuesOf('build-b').catch(() => 0)) === 1 ? true : undefined),
        'B to poll its first queue',
      );

      // Act: the operator promotes B (`npm run deploy -- promote`) before B polls its second queue.
      const promote = spawn(
        process.execPath,
        ['--import', 'tsx', path.join(ROOT, 'scripts', 'deploy.ts'), 'promote', 'build-b'],
        { cwd: ROOT, env: { ...process.env, WORKER_DEPLOYMENT_NAME: deploymentName } },
      );
      let output = '';
      promote.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      promote.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
      let exitCode: number | null | undefined;
      const exited = new Promise<number | null>((resolve) => promote.once('exit', resolve));
      void exited.then((code) => (exitCode = code));
      const waiting = () => /waiting for build-b/.test(output);
      await eventually(async () => (waiting() || exitCode !== undefined ? true : undefined), 'the command', 60_000);
      assert.ok(waiting(), `the promote did not wait for B's second queue (exit ${exitCode}):\n${output}`);
      await poll('build-b', taskQueue);

      // Assess: it went through once B polled both.
      assert.equal(await exited, 0, output);
      assert.match(output, /build-b is current \(was build-a\)/);
      assert.equal((await describeDeployment(h.client, deploymentName))?.current, 'build-b');
    } finally {
      await h.client.workflow
        .getHandle(inboundWorkflowId(ref))
        .terminate('test over')
        .catch(() => undefined);
      for (const { worker } of running) if (worker.getState() === 'RUNNING') worker.shutdown();
      await Promise.allSettled(running.map((r) => r.done));
      await connection.close();
    }
  });
});

/** A TCP port nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const { port, close } = await occupiedPort();
  await close();
  return port;
}

const stackLine = /\n\s+at [^\n]+\(/;

describe('worker start-up failures are one line each', () => {
  test('an unreachable TEMPORAL_ADDRESS names it, in words: no Rust transport dump, one prefix', async () => {
    const port = await closedPort();
    const worker = AppProcess.spawnWorker(h, { env: { TEMPORAL_ADDRESS: `127.0.0.1:${port}` } });
    processes.push(worker);
    const { code } = await worker.exited;
    assert.equal(code, 1);
    assert.match(
      worker.stderr,
      new RegExp(
        `^The worker cannot start: cannot reach Temporal at 127\\.0\\.0\\.1:${port} .*\\(TEMPORAL_ADDRESS\\): tcp connect error: Connection refused`,
        'm',
      ),
    );
    assert.doesNotMatch(worker.stderr, /tonic::|ConnectError\(|Os \{/);
    assert.doesNotMatch(worker.stderr, stackLine);
  });

  test('a configuration error says "The worker cannot start" once, not "worker: The worker …"', async () => {
    const worker = AppProcess.spawnWorker(h, { env: { WORKER_NICE: '20' } });
    processes.push(worker);
    await worker.exited;
    assert.match(worker.stderr, /^The worker cannot start: its configuration is invalid/m);
    assert.doesNotMatch(worker.stderr, /worker: The worker/);
  });
});

describe('the worker logs one line a person can follow per outcome of a message', () => {
  let worker: AppProcess;
  let approvalInbox: string;
  let plainInbox: string;
  before(async () => {
    // The workers of the tests above poll the same task queue: this worker alone must get the tasks.
    await Promise.all(processes.map((p) => p.stop()));
    approvalInbox = h.newInbox('approval');
    plainInbox = h.newInbox('plain');
    worker = await AppProcess.startWorker(h, { env: { APPROVAL_REQUIRED_INBOXES: approvalInbox } });
    processes.push(worker);
  });

  const linesOf = (workflowId: string) => worker.logLines.filter((line) => line.workflowId === workflowId);
  const messagesOf = (workflowId: string) => linesOf(workflowId).map((line) => String(line.msg));
  async function waitForLine(workflowId: string, prefix: string): Promise<void> {
    await worker.waitForLog(
      (line) => line.workflowId === workflowId && String(line.msg).startsWith(prefix),
      `"${prefix}" for ${workflowId}`,
      60_000,
    );
  }
  async function inbound(inboxId: string): Promise<MessageRef> {
    const sent = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `logs-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Where is my order?',
      text: 'Order 1234 has not arrived. Secret-customer-words-xyzzy.',
    });
    return { inboxId, messageId: sent.message.message_id };
  }

  test('decided, drafted, awaiting approval, verdict accepted (by whom), sent: one info line each, with the workflow id', async () => {
    // Act
    const ref = await inbound(approvalInbox);
    const workflowId = inboundWorkflowId(ref);
    await waitForLine(workflowId, 'awaiting approval');
    const handle = h.client.workflow.getHandle(workflowId);
    await eventually(
      async () =>
        (
          await handle
            .executeUpdate(reviewUpdate, { args: [{ verdict: 'approve', revision: 1, reviewer: 'grace' }] })
            .catch(() => undefined)
        )?.accepted,
      'the verdict accepted',
    );
    await handle.result();
    await waitForLine(workflowId, 'ended: sent');

    // Assess: in order, once each, at info
    const outcomes = messagesOf(workflowId).filter((msg) =>
      /^(decided|drafted|awaiting|verdict|reply|ended)/.test(msg),
    );
    assert.deepEqual(outcomes, [
      'decided: reply (approval required)',
      'drafted',
      "awaiting approval: a reviewer's verdict is needed",
      'verdict accepted: approve by grace',
      'reply sent',
      'ended: sent',
    ]);
    for (const line of linesOf(workflowId).filter((l) => outcomes.includes(String(l.msg)))) {
      assert.equal(line.level, 30, `${String(line.msg)} at info`);
    }
    assert.equal(linesOf(workflowId).find((l) => l.msg === 'verdict accepted: approve by grace')?.reviewer, 'grace');
  });

  test('a skipped message says why; nothing personal and no task token in any line', async () => {
    // Act: a sender's auto-reply is never answered
    const sent = await h.sandbox.inbound({
      inbox_id: plainInbox,
      from: `robot-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Out of office',
      text: 'I am away. Secret-customer-words-xyzzy.',
      headers: { 'Auto-Submitted': 'auto-replied' },
    });
    const workflowId = inboundWorkflowId({ inboxId: plainInbox, messageId: sent.message.message_id });
    await waitForLine(workflowId, 'ended: skipped');

    // Assess
    assert.deepEqual(
      messagesOf(workflowId).filter((msg) => /^(decided|ended)/.test(msg)),
      ['decided: skip (auto-submitted)', 'ended: skipped (auto-submitted)'],
    );
    const all = JSON.stringify(worker.logLines);
    assert.doesNotMatch(all, /Secret-customer-words-xyzzy|customer\.example|Where is my order/);
    assert.ok(
      worker.logLines.every((line) => line.taskToken === undefined),
      'no taskToken at info',
    );
    assert.ok(
      worker.logLines.every((line) => line.msg !== 'Worker state changed'),
      "the SDK's state changes are at debug",
    );
  });

  test('a failed run logs its failure type and message; so does the SDK\'s "Workflow failed" line', async () => {
    // Act: a message AgentMail does not have fails the run at once (MessageNotFound is final)
    const ref = { inboxId: plainInbox, messageId: `<missing-${randomUUID()}@nowhere>` };
    const workflowId = inboundWorkflowId(ref);
    await h.client.workflow.start(INBOUND_MESSAGE_WORKFLOW, { taskQueue: h.taskQueue, workflowId, args: [ref] });
    await waitForLine(workflowId, 'ended: failed');

    // Assess
    const ended = linesOf(workflowId).find((line) => String(line.msg).startsWith('ended: failed'));
    assert.equal(ended?.failureType, 'MessageNotFound');
    assert.match(String(ended?.msg), /^ended: failed \(MessageNotFound: AgentMail has no message /);
    await worker.waitForLog(
      (line) => line.workflowId === workflowId && line.msg === 'Workflow failed',
      'Workflow failed',
    );
    // The SDK's own line had `error: {}`; it now carries the failure's message (its class does not
    // survive the sandbox's boundary: the outcome line above is the one with the type).
    const sdk = linesOf(workflowId).find((line) => line.msg === 'Workflow failed');
    assert.match(String(sdk?.error), /AgentMail has no message/);
    assert.equal(typeof sdk?.failureType, 'string');
  });
});

describe('API start-up: failures name their variable, one line each', () => {
  test('a PORT in use stops the API in one line naming PORT, no stack', async () => {
    const taken = await occupiedPort();
    try {
      const api = AppProcess.spawnApi(h, { env: { PORT: String(taken.port) } });
      processes.push(api);
      const { code } = await api.exited;
      assert.equal(code, 1);
      assert.match(
        api.stderr,
        new RegExp(
          `^The API cannot start: PORT=${taken.port} on 127\\.0\\.0\\.1 is already in use .*set PORT to a free port$`,
          'm',
        ),
      );
      assert.doesNotMatch(api.stderr, /EADDRINUSE/);
      assert.doesNotMatch(api.stderr, stackLine);
    } finally {
      await taken.close();
    }
  });

  test('an unreachable DATABASE_URL: the API listens, warns per retry with a growing pause (no stack), and /readyz says what is missing', async () => {
    // Act
    const port = await closedPort();
    const api = await AppProcess.startApi(h, {
      env: { DATABASE_URL: `postgres://replyonce:secret-password@127.0.0.1:${port}/replyonce` },
    });
    processes.push(api);
    const warnings = () => api.logLines.filter((line) => line.dependency === 'postgres' && line.level === 40);
    await api.waitForLog(() => warnings().length >= 3, 'three warnings', 30_000);
    const readyz = await fetch(`${api.url}/readyz`);
    const body = (await readyz.json()) as { checks: Record<string, string>; missing?: string[] };

    // Assess
    const delays = warnings().map((line) => Number(line.retryInMs));
    assert.deepEqual(delays.slice(0, 3), [1_000, 2_000, 4_000]);
    for (const line of warnings()) {
      assert.match(
        String(line.msg),
        new RegExp(
          `^cannot reach Postgres at 127\\.0\\.0\\.1:${port}/replyonce \\(DATABASE_URL\\): .*ECONNREFUSED.*; retrying in`,
        ),
      );
      assert.equal(line.err, undefined, 'no error object, no stack');
      assert.equal(line.variable, 'DATABASE_URL');
    }
    assert.equal(readyz.status, 503);
    assert.equal(body.checks.postgres, 'unreachable');
    assert.match(body.missing?.[0] ?? '', /DATABASE_URL/);
    assert.doesNotMatch(JSON.stringify(body) + JSON.stringify(warnings()), /secret-password/);
  });

  test('an unreachable TEMPORAL_ADDRESS: the API accepts webhooks (ready) and says Temporal is missing, in /readyz and the log', async () => {
    const port = await closedPort();
    const api = await AppProcess.startApi(h, { env: { TEMPORAL_ADDRESS: `127.0.0.1:${port}` } });
    processes.push(api);
    await api.waitForLog((line) => line.dependency === 'temporal' && line.level === 40, 'the Temporal warning', 30_000);
    const readyz = await fetch(`${api.url}/readyz`);
    const body = (await readyz.json()) as { checks: Record<string, string>; missing?: string[] };

    assert.equal(readyz.status, 200, 'Postgres is there: webhooks are accepted');
    assert.equal(body.checks.temporal, 'unreachable');
    assert.match(
      body.missing?.[0] ?? '',
      new RegExp(`cannot reach Temporal at 127\\.0\\.0\\.1:${port} .*\\(TEMPORAL_ADDRESS\\)`),
    );
    const warning = api.logLines.find((line) => line.dependency === 'temporal');
    assert.match(
      String(warning?.msg),
      /\(TEMPORAL_ADDRESS\): no answer within 5 s \(is the server running there\?.*; retrying in 1 s$/,
    );
  });

  test('a namespace that does not exist is named with what to run, and /readyz is clean once things answer', async () => {
    const api = await AppProcess.startApi(h, { env: { TEMPORAL_NAMESPACE: `missing-${randomUUID().slice(0, 8)}` } });
    processes.push(api);
    await api.waitForLog(
      (line) => line.dependency === 'temporal' && line.level === 40,
      'the namespace warning',
      30_000,
    );
    const body = (await (await fetch(`${api.url}/readyz`)).json()) as {
      checks: Record<string, string>;
      missing?: string[];
    };
    assert.match(body.missing?.[0] ?? '', /TEMPORAL_NAMESPACE.*npm run temporal:setup/);

    const healthy = await AppProcess.startApi(h);
    processes.push(healthy);
    await eventually(async () => {
      const answer = (await (await fetch(`${healthy.url}/readyz`)).json()) as {
        checks: Record<string, string>;
        missing?: string[];
      };
      return answer.checks.temporal === 'ok' && answer.missing === undefined ? true : undefined;
    }, 'a clean /readyz');
  });
});

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../api/app';
import { catchUpInbox, CatchUpRequestError, parseSince, RESUME_OVERLAP_MS, type CatchUpDeps } from '../intake/catch-up';
import { InboxCursors } from '../intake/inbox-cursors';
import { IntakeStore } from '../intake/intake-store';
import { ConfigError, loadApiConfig, loadWorkerConfig } from '../lib/config';
import { inboundWorkflowId } from '../lib/hashing';
import { createLogger } from '../lib/logger';
import { messageReceivedBody } from '../sandbox/control-client';
import { Harness } from './support/harness';
import { messageReceivedPayload, signedHeaders } from './support/signing';
import { eventually, workflowExists } from './support/temporal';

// Catch-up after an outage, on real parts: the sandbox's webhook is switched off (as AgentMail
// does after 5 days of failures), mail arrives and is never delivered, and the replay — the
// command a person types, the admin route, or the module under both — lists the inbox and hands
// each message over through the intake (a row per message, as a webhook does); the harness's API
// relay starts the workflows. Every message is answered exactly once.
let h: Harness;
let cursors: InboxCursors;
let deps: CatchUpDeps;
before(async () => {
  h = await Harness.start();
  cursors = new InboxCursors(h.db);
  deps = { agentmail: h.agentmail, intake: new IntakeStore(h.db, h.taskQueue), cursors, operationRetentionDays: 90 };
});
after(() => h.close());

const repoRoot = path.resolve(__dirname, '..');
const DAY_MS = 24 * 60 * 60 * 1000;
const mail = (inboxId: string) => ({
  inbox_id: inboxId,
  from: `Grace <grace-${randomUUID().slice(0, 8)}@customer.example>`,
  subject: 'Invoice',
  text: 'Where is my invoice?',
});

/** Mail that arrives while AgentMail's webhook is off: stored, never delivered. */
async function arriveDuringOutage(inboxId: string, count: number) {
  await h.sandbox.setWebhook({ enabled: false });
  try {
    const arrived = [];
    for (let i = 0; i < count; i += 1) arrived.push(await h.sandbox.inbound(mail(inboxId)));
    // Each event's delivery found the endpoint off and gave up (AgentMail never redelivers it).
    const ids = new Set(arrived.map((a) => a.event_id));
    await eventually(
      async () =>
        (await h.sandbox.events()).filter((e) => ids.has(e.event_id)).every((e) => e.status === 'skipped')
          ? true
          : undefined,
      'the deliveries to be skipped',
    );
    return arrived.map((a) => a.message);
  } finally {
    await h.sandbox.setWebhook({ enabled: true });
  }
}

/** `npm run replay -- …` as a person types it; `terminal`: under a pseudo-terminal (util-linux `script`), as at a shell. */
function runReplay(
  args: string[],
  options: { terminal?: boolean } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const command = [process.execPath, '--import', 'tsx', path.join(repoRoot, 'scripts', 'replay.ts'), ...args];
  const [file, argv] = options.terminal
    ? ['script', ['-qec', command.map(shellQuote).join(' '), '/dev/null']]
    : [command[0]!, command.slice(1)];
  const child = spawn(file, argv, {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      AGENTMAIL_API_KEY: h.apiKey,
      AGENTMAIL_BASE_URL: h.sandboxUrl,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

const shellQuote = (arg: string): string => `'${arg.replaceAll("'", `'\\''`)}'`;
const hasScript = spawnSync('script', ['--version']).status === 0;

const replyCount = async (inboxId: string, messageId: string) =>
  (await h.sandbox.outbox({ inbox_id: inboxId, in_reply_to: messageId })).length;

describe('npm run replay', () => {
  test('after an outage: the missed messages are answered once, the answered one is not, our own reply is skipped; a second run starts nothing', async () => {
    // Prepare: one message answered normally, then three that arrive while the webhook is off.
    const inboxId = h.newInbox();
    const since = new Date(Date.now() - 60_000).toISOString();
    const answered = await h.sandbox.inbound(mail(inboxId));
    assert.equal((await h.resultOf({ inboxId, messageId: answered.message.message_id })).status, 'sent');
    const missed = await arriveDuringOutage(inboxId, 3);
    for (const message of missed)
      assert.equal(
        await workflowExists(h.client, inboundWorkflowId({ inboxId, messageId: message.message_id })),
        false,
      );

    // Act
    const first = await runReplay(['--inbox', inboxId, '--since', since]);

    // Assess
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      /^\[replay\] .*page 1, 5 listed, handed over 3, already handed over 1, already answered 0, skipped 1$/m,
      'plain progress lines when stdout is not a terminal',
    );
    assert.match(
      first.stdout,
      /handed over 3 \/ already handed over 1 \/ already answered 0 \/ stopped by an operator 0 \/ skipped 1/,
    );
    for (const message of missed) {
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
      assert.equal(await replyCount(inboxId, message.message_id), 1);
    }
    assert.equal(await replyCount(inboxId, answered.message.message_id), 1);
    assert.equal(
      (await cursors.get(inboxId))?.toISOString(),
      missed[2]!.timestamp,
      'the cursor is the newest message handled',
    );

    // Run again without --since: it resumes from the cursor (less the overlap) and starts nothing.
    const second = await runReplay(['--inbox', inboxId]);
    assert.equal(second.code, 0, second.stderr);
    assert.match(
      second.stdout,
      /handed over 0 \/ already handed over 4 \/ already answered 0 \/ stopped by an operator 0 \/ skipped 4/,
    );
    assert.match(second.stdout, /every handed-over message of this task queue has its workflow started/);
    assert.match(second.stdout, /resumed from the last processed message/);
    for (const message of [answered.message, ...missed]) assert.equal(await replyCount(inboxId, message.message_id), 1);
    assert.equal(h.drafter.callsFor({ inboxId, messageId: missed[0]!.message_id }), 1);
  });

  test(
    'on a terminal it draws a progress bar',
    { skip: !hasScript && 'util-linux script is not installed' },
    async () => {
      const inboxId = h.newInbox();
      const missed = await arriveDuringOutage(inboxId, 2);
      const run = await runReplay(['--inbox', inboxId, '--since', '10m'], { terminal: true });
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /\u2588+.*\| 2\/2 \| handed over 2 · already 0 · answered 0 · skipped 0/);
      assert.doesNotMatch(run.stdout, /^\[replay\] .*page 1/m);
      for (const message of missed)
        assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
    },
  );

  test('--all resumes every inbox with a cursor', async () => {
    const inboxId = h.newInbox();
    const first = await h.sandbox.inbound(mail(inboxId));
    await h.resultOf({ inboxId, messageId: first.message.message_id });
    const missed = await arriveDuringOutage(inboxId, 2);
    const run = await runReplay(['--all']);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.split('\n');
    const at = lines.findIndex((line) => line.includes(`${inboxId}: after`) && line.includes('resumed'));
    assert.match(
      lines[at + 1] ?? '',
      /handed over 2 \/ already handed over 1 \/ already answered 0 \/ stopped by an operator 0 \/ skipped 1/,
      run.stdout,
    );
    for (const message of missed)
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
  });

  test('refuses to guess: no inbox named → usage; no cursor and no --since → says so; exit 1', async () => {
    const none = await runReplay([]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /--inbox.*--all/);
    const fresh = h.newInbox();
    await h.sandbox.createInbox(fresh);
    const noCursor = await runReplay(['--inbox', fresh]);
    assert.equal(noCursor.code, 1);
    assert.match(noCursor.stderr, /nothing to resume from: give a start time \(--since\)/);
  });
});

describe('the catch-up module', () => {
  test('follows every page, ascending; interrupted midway it stops between pages, and the rerun hands over the rest exactly once', async () => {
    const inboxId = h.newInbox();
    const since = new Date(Date.now() - 60_000);
    const missed = await arriveDuringOutage(inboxId, 5);
    const stop = new AbortController();

    const first = await catchUpInbox(deps, {
      inboxId,
      since,
      pageSize: 2,
      signal: stop.signal,
      onProgress: (p) => p.handedOver >= 2 && stop.abort(),
    });
    assert.equal(first.interrupted, true);
    assert.equal(first.handedOver, 2, 'a page at a time');
    assert.equal(
      (await cursors.get(inboxId))?.toISOString(),
      missed[1]!.timestamp,
      'the cursor moved with the page, never past a message not handed over',
    );

    const rerun = await catchUpInbox(deps, { inboxId, since, pageSize: 2 });
    assert.equal(rerun.interrupted, false);
    assert.equal(rerun.pages >= 3, true, `${rerun.pages} pages`);
    assert.deepEqual([rerun.handedOver, rerun.alreadyHandedOver], [3, 2]);
    for (const message of missed) {
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
      assert.equal(await replyCount(inboxId, message.message_id), 1);
    }
  });

  test('over messages the webhook already handed over: counted as already handed over; one whose webhook arrives while the catch-up runs is started once', async () => {
    // Prepare: three messages answered by webhook, one missed, and one held back whose webhook
    // the test delivers while the catch-up is listing.
    const inboxId = h.newInbox();
    const since = new Date(Date.now() - 60_000);
    const answered = [];
    for (let i = 0; i < 3; i += 1) {
      const inbound = await h.sandbox.inbound(mail(inboxId));
      answered.push(inbound.message);
      assert.equal((await h.resultOf({ inboxId, messageId: inbound.message.message_id })).status, 'sent');
    }
    const [missed] = await arriveDuringOutage(inboxId, 1);
    const late = await h.sandbox.inbound({ ...mail(inboxId), deliver: false });
    const lateRef = { inboxId, messageId: late.message.message_id };
    const lateBody = messageReceivedBody(late, late.event_id);
    // Each page listing takes 300 ms, so the webhook (posted after page 1) lands long before the last page.
    await h.sandbox.setFaults({
      match: { method: 'GET', path: `/v0/inboxes/${inboxId}/messages` },
      action: 'delay',
      ms: 300,
    });
    let webhook: Promise<number> | undefined;
    try {
      // Act
      const summary = await catchUpInbox(deps, {
        inboxId,
        since,
        pageSize: 2,
        onProgress: (p) => {
          if (p.pages === 1)
            webhook ??= fetch(`${h.apiUrl}/webhooks/agentmail`, {
              method: 'POST',
              body: lateBody,
              headers: signedHeaders(h.webhookSecret, lateBody),
            }).then((r) => r.status);
        },
      });

      // Assess: the three answered and the late one have rows; only the missed one is new. Our
      // replies are skipped: three, or four when the late message's own reply is already listed.
      assert.equal(await webhook, 204);
      assert.deepEqual(
        {
          handedOver: summary.handedOver,
          alreadyHandedOver: summary.alreadyHandedOver,
          alreadyAnswered: summary.alreadyAnswered,
        },
        { handedOver: 1, alreadyHandedOver: 4, alreadyAnswered: 0 },
      );
      assert.ok([3, 4].includes(summary.skipped), `skipped ${summary.skipped}`);
    } finally {
      await h.sandbox.clearFaults();
    }
    assert.equal((await h.intakeRow(lateRef))?.first_event_id, late.event_id, 'the webhook handed it over first');
    for (const message of [...answered, missed!, late.message]) {
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
      assert.equal(await replyCount(inboxId, message.message_id), 1);
    }
    let runs = 0;
    for await (const _ of h.client.workflow.list({ query: `WorkflowId = '${inboundWorkflowId(lateRef)}'` })) runs += 1;
    assert.equal(runs, 1);
    assert.equal((await h.intakeRow(lateRef))?.attempts, 1, 'started once');
  });

  test('an answered message whose intake row was pruned (labelled replied) is counted as already answered: no row, no second run', async () => {
    const inboxId = h.newInbox();
    const since = new Date(Date.now() - 60_000);
    const inbound = await h.sandbox.inbound(mail(inboxId));
    const ref = { inboxId, messageId: inbound.message.message_id };
    assert.equal((await h.resultOf(ref)).status, 'sent');
    await h.db.query('DELETE FROM intake WHERE workflow_id = $1', [inboundWorkflowId(ref)]);

    const summary = await catchUpInbox(deps, { inboxId, since });
    assert.deepEqual([summary.handedOver, summary.alreadyHandedOver, summary.alreadyAnswered], [0, 0, 1]);
    assert.equal(await h.intakeRow(ref), undefined, 'no row made for it');
    assert.equal(await replyCount(inboxId, ref.messageId), 1);
  });

  test('needs no Temporal: with none reachable the rows are handed over and the cursor moves; the relay starts them', async () => {
    const inboxId = h.newInbox();
    const since = new Date(Date.now() - 60_000);
    const messages = [];
    for (let i = 0; i < 3; i += 1)
      messages.push((await h.sandbox.inbound({ ...mail(inboxId), deliver: false })).message);
    // The catch-up's dependencies hold no Temporal client at all: only the intake table.
    const summary = await catchUpInbox(deps, { inboxId, since });
    assert.equal(summary.handedOver, 3);
    assert.equal(summary.cursor, messages[2]!.timestamp);
    for (const message of messages)
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');
  });

  test('never reaches past the operation store: an explicit --since beyond the horizon is refused; a stale cursor is clamped, with a note', async () => {
    const inboxId = h.newInbox();
    await h.sandbox.createInbox(inboxId);
    await assert.rejects(
      catchUpInbox(deps, { inboxId, since: new Date(Date.now() - 89.5 * DAY_MS) }),
      CatchUpRequestError,
    );
    await assert.rejects(catchUpInbox(deps, { inboxId }), /nothing to resume from/);

    await cursors.advance(inboxId, new Date(Date.now() - 100 * DAY_MS));
    const summary = await catchUpInbox(deps, { inboxId });
    assert.equal(summary.resumed, true);
    assert.match(summary.note ?? '', /past the replay horizon/);
    assert.ok(Math.abs(Date.parse(summary.since) - (Date.now() - 89 * DAY_MS)) < 60_000);
  });

  test('--since: an ISO time or an age', () => {
    const now = Date.parse('2025-12-01T12:00:00Z');
    assert.equal(parseSince('36h', now).toISOString(), '2025-11-30T00:00:00.000Z');
    assert.equal(parseSince('6d', now).toISOString(), '2025-11-25T12:00:00.000Z');
    assert.equal(parseSince('90m', now).toISOString(), '2025-12-01T10:30:00.000Z');
    assert.equal(parseSince('2025-11-30T08:15:00+01:00').toISOString(), '2025-11-30T07:15:00.000Z');
    assert.throws(() => parseSince('yesterday'), CatchUpRequestError);
  });
});

describe('the ingress keeps the cursor', () => {
  const deliver = async (payload: object) => {
    const body = JSON.stringify(payload);
    return (
      await fetch(`${h.apiUrl}/webhooks/agentmail`, {
        method: 'POST',
        body,
        headers: signedHeaders(h.webhookSecret, body),
      })
    ).status;
  };
  const payloadFor = (message: { inbox_id: string; message_id: string }, timestamp: string | undefined) => {
    const payload = messageReceivedPayload({ inboxId: message.inbox_id, messageId: message.message_id });
    return { ...payload, message: { ...payload.message, timestamp } };
  };

  test('by the message time in the payload, not by arrival order; a newer time under a duplicate advances it; no time leaves it', async () => {
    const inboxId = h.newInbox();
    const [a, b, c] = [
      (await h.sandbox.inbound({ ...mail(inboxId), deliver: false })).message,
      (await h.sandbox.inbound({ ...mail(inboxId), deliver: false })).message,
      (await h.sandbox.inbound({ ...mail(inboxId), deliver: false })).message,
    ];
    const t = Date.parse('2025-12-01T10:00:00Z');
    const at = (ms: number) => new Date(t + ms).toISOString();

    assert.equal(await deliver(payloadFor(b, at(60_000))), 204);
    assert.equal(await deliver(payloadFor(a, at(0))), 204, 'an older message arriving later');
    assert.equal((await cursors.get(inboxId))?.toISOString(), at(60_000));

    assert.equal(await deliver(payloadFor(c, undefined)), 204, 'no timestamp: still accepted');
    assert.equal(await deliver(payloadFor(c, 'not a time')), 204, 'an unreadable timestamp: still accepted');
    assert.equal((await cursors.get(inboxId))?.toISOString(), at(60_000));

    assert.equal(
      await deliver(payloadFor(a, at(120_000))),
      204,
      'the same message under another event id (outcome duplicate)',
    );
    assert.equal((await cursors.get(inboxId))?.toISOString(), at(120_000));
  });
});

describe('POST /admin/replay', () => {
  const token = `admin-${randomUUID()}`;
  let admin: FastifyInstance;
  before(async () => {
    admin = buildApp({
      db: h.db,
      temporal: h.client,
      taskQueue: h.taskQueue,
      webhookSecret: h.webhookSecret,
      deadlineMs: 5_000,
      bodyLimitBytes: 1_048_576,
      logger: createLogger('test-admin', process.env.TEST_LOG_LEVEL ?? 'silent'),
      admin: { token, agentmail: h.agentmail, operationRetentionDays: 90 },
    });
    await admin.ready();
  });
  after(() => admin.close());
  const replay = (body: unknown, authorization?: string) =>
    admin.inject({
      method: 'POST',
      url: '/admin/replay',
      payload: body as object,
      headers: authorization ? { authorization } : {},
    });

  test('without ADMIN_TOKEN the route does not exist (404)', async () => {
    const response = await fetch(`${h.apiUrl}/admin/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: '{}',
    });
    assert.equal(response.status, 404);
  });

  test('a missing or wrong bearer token → 401, nothing started', async () => {
    const inboxId = h.newInbox();
    const [missed] = await arriveDuringOutage(inboxId, 1);
    const since = new Date(Date.now() - 60_000).toISOString();
    for (const authorization of [undefined, `Bearer ${token}x`, `Basic ${token}`, 'Bearer ']) {
      const response = await replay({ inbox_id: inboxId, since }, authorization);
      assert.equal(response.statusCode, 401, String(authorization));
      assert.equal(response.headers['www-authenticate'], 'Bearer');
    }
    assert.equal(await workflowExists(h.client, inboundWorkflowId({ inboxId, messageId: missed!.message_id })), false);
  });

  test('the right token → the missed messages are handed over (and answered) and the summary is returned; running it again hands over nothing', async () => {
    const inboxId = h.newInbox();
    const missed = await arriveDuringOutage(inboxId, 2);
    const since = new Date(Date.now() - 60_000).toISOString();
    const first = await replay({ inbox_id: inboxId, since }, `Bearer ${token}`);
    assert.equal(first.statusCode, 200, first.body);
    const body = first.json<{
      summaries: Array<{ inboxId: string; handedOver: number }>;
      totals: { handedOver: number; alreadyHandedOver: number };
    }>();
    assert.deepEqual(
      body.summaries.map((s) => [s.inboxId, s.handedOver]),
      [[inboxId, 2]],
    );
    assert.deepEqual(
      { handedOver: body.totals.handedOver, alreadyHandedOver: body.totals.alreadyHandedOver },
      { handedOver: 2, alreadyHandedOver: 0 },
    );
    for (const message of missed)
      assert.equal((await h.workflowResult({ inboxId, messageId: message.message_id })).status, 'sent');

    const again = await replay({ inbox_ids: [inboxId], since }, `Bearer ${token}`);
    const totals = again.json<{ totals: { handedOver: number; alreadyHandedOver: number } }>().totals;
    assert.deepEqual([totals.handedOver, totals.alreadyHandedOver], [0, 2]);
    for (const message of missed) assert.equal(await replyCount(inboxId, message.message_id), 1);
  });

  test('bad requests: 400 for a bad since, a since past the horizon, both or neither inbox field; 404 for an unknown inbox', async () => {
    const inboxId = h.newInbox();
    await h.sandbox.createInbox(inboxId);
    const auth = `Bearer ${token}`;
    assert.equal((await replay({ inbox_id: inboxId, since: 'last tuesday' }, auth)).statusCode, 400);
    assert.equal((await replay({ inbox_id: inboxId, since: '400d' }, auth)).statusCode, 400);
    assert.equal((await replay({ inbox_id: inboxId, inbox_ids: [inboxId], since: '1h' }, auth)).statusCode, 400);
    assert.equal((await replay({ since: '1h' }, auth)).statusCode, 400);
    assert.equal(
      (await replay({ inbox_id: `nobody-${randomUUID()}@${h.inboxDomain}`, since: '1h' }, auth)).statusCode,
      404,
    );
  });
});

describe('configuration', () => {
  const apiEnv = {
    DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
    AGENTMAIL_WEBHOOK_SECRET: 'whsec_dGVzdHNlY3JldC10ZXN0c2VjcmV0LTI0',
  };
  test('ADMIN_TOKEN: off when unset, at least 16 characters, and it needs AGENTMAIL_API_KEY', () => {
    assert.equal(loadApiConfig(apiEnv).ADMIN_TOKEN, undefined);
    assert.throws(
      () => loadApiConfig({ ...apiEnv, ADMIN_TOKEN: 'short', AGENTMAIL_API_KEY: 'k' }),
      /ADMIN_TOKEN must be at least 16/,
    );
    assert.throws(
      () => loadApiConfig({ ...apiEnv, ADMIN_TOKEN: 'x'.repeat(32) }),
      (error: unknown) =>
        error instanceof ConfigError && /AGENTMAIL_API_KEY is required when ADMIN_TOKEN is set/.test(error.message),
    );
    assert.equal(
      loadApiConfig({ ...apiEnv, ADMIN_TOKEN: 'x'.repeat(32), AGENTMAIL_API_KEY: 'k' }).ADMIN_TOKEN,
      'x'.repeat(32),
    );
  });

  test('OPERATION_RETENTION_DAYS (default 90, at least 8), WATCHDOG_REENABLE (default false), WATCHDOG_WEBHOOK_IDS', () => {
    const workerEnv = { DATABASE_URL: apiEnv.DATABASE_URL, AGENTMAIL_API_KEY: 'k' };
    const defaults = loadWorkerConfig(workerEnv);
    assert.deepEqual(
      [defaults.OPERATION_RETENTION_DAYS, defaults.WATCHDOG_REENABLE, defaults.WATCHDOG_WEBHOOK_IDS],
      [90, false, []],
    );
    const set = loadWorkerConfig({
      ...workerEnv,
      OPERATION_RETENTION_DAYS: '30',
      WATCHDOG_REENABLE: 'true',
      WATCHDOG_WEBHOOK_IDS: 'ep_1, ep_2',
    });
    assert.deepEqual(
      [set.OPERATION_RETENTION_DAYS, set.WATCHDOG_REENABLE, set.WATCHDOG_WEBHOOK_IDS],
      [30, true, ['ep_1', 'ep_2']],
    );
    assert.throws(() => loadWorkerConfig({ ...workerEnv, OPERATION_RETENTION_DAYS: '7' }), /OPERATION_RETENTION_DAYS/);
  });

  test("the resume overlap covers AgentMail's ~27.5 h of retries", () => {
    assert.ok(RESUME_OVERLAP_MS > 27.5 * 60 * 60 * 1000);
  });
});

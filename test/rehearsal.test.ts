import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { Comparison } from '../activities/rehearsal/compare';
import type { RehearsalReport } from '../activities/rehearsal/report';
import { eraseRehearsedMessages } from '../activities/rehearsal/store';
import { readFolder, syncCollection } from '../knowledge';
import { addReviewer } from '../review/reviewers';
import { buildModelStandIn, type ModelStandIn } from '../sandbox/model/app';
import { axeViolations, seriousOrWorse, signIn, startDesk } from './support/desk';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { CHROMIUM, launchChromium } from './support/web-ui';

// A rehearsal of 200 past messages of one inbox (threads, robots, bursts, hand-offs, a held draft,
// an approval inbox) run by `npm run rehearse` itself — a real process, the rehearsal's worker —
// against the sandbox, the model stand-in, the suite's Temporal and Postgres. It proves the report,
// that nothing was written anywhere (the sandbox's write log, tickets, operations, the budget), that
// a process SIGKILLed mid-run resumes with each message drafted once, that a comparison of two
// configurations lists exactly the messages whose outcome changed, and the desk's page.

const ROOT = path.resolve(__dirname, '..');
const COLLECTION = 'rehearsal-kb';
const COALESCE_MS = 60_000;
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

let h: Harness;
let model: ModelStandIn;
let modelUrl: string;
let inbox: string;
let from: Date;
const to = new Date(Date.now() + 5 * DAY);
/** Message ids by their number in the seed (`[#n]` in each text). */
const ids: string[] = [];

const questions = readFileSync(path.join(ROOT, 'examples', 'knowledge', 'questions.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => (JSON.parse(line) as { text: string }).text);

before(async () => {
  h = await Harness.start({ worker: false });
  model = buildModelStandIn();
  await model.app.listen({ port: 0, host: '127.0.0.1' });
  modelUrl = `http://127.0.0.1:${(model.app.server.address() as AddressInfo).port}`;
  const { documents } = await readFolder(path.join(ROOT, 'examples', 'knowledge', 'help-centre'));
  await syncCollection(h.db, { collection: COLLECTION, language: 'english', documents });
  inbox = h.newInbox('rehearse');
  from = new Date(Date.now() - 15 * DAY);
  await seed();
});
after(async () => {
  await model?.app.close();
  await h?.close();
});

/** 200 inbound messages over ten days, and the team's answers in their threads. */
async function seed(): Promise<void> {
  const at = (n: number, plus = 0) => new Date(from.getTime() + MINUTE + n * 70 * MINUTE + plus).toISOString();
  const inbound = async (n: number, fields: Record<string, unknown>) => {
    const { message } = await h.sandbox.inbound({
      inbox_id: inbox,
      deliver: false,
      timestamp: at(n),
      subject: `Question ${n}`,
      ...fields,
    } as Parameters<Harness['sandbox']['inbound']>[0]);
    ids[n] = message.message_id;
    return message;
  };
  const answer = async (
    n: number,
    customer: string,
    threadId: string,
    afterMs: number,
    text: string,
    labels: string[] = [],
  ) =>
    h.sandbox.inbound({
      inbox_id: inbox,
      deliver: false,
      from: inbox,
      to: [customer],
      thread_id: threadId,
      timestamp: at(n, afterMs),
      subject: `Re: Question ${n}`,
      text,
      labels: ['sent', ...labels],
    });
  const markers: Record<number, string> = {};
  for (let n = 180; n < 190; n++) markers[n] = '[handoff-me]';
  markers[190] = '[link-me]';
  markers[191] = '[raw-me]';
  markers[192] = '[slow-me]';
  for (const n of [20, 21, 22]) markers[n] = '[b-handoff]';
  for (let n = 0; n < 200; n++) {
    const customer = `customer-${n}@shop-customers.example`;
    if (n < 140 || (n >= 180 && n < 193)) {
      const text = `${questions[n % questions.length]} ${markers[n] ?? ''} [#${n}]`;
      const message = await inbound(n, { from: customer, text });
      const kind =
        n >= 180 ? 'oneline' : n % 10 === 0 ? 'slow' : n % 10 === 1 ? 'escalated' : n % 10 === 2 ? 'oneline' : 'normal';
      const reply =
        kind === 'oneline'
          ? 'Yes, done.'
          : `Hello,\n\nThank you for asking. Here is what we found.\n\nBest regards,\nSupport`;
      await answer(
        n,
        customer,
        message.thread_id,
        kind === 'slow' ? 3 * DAY : 2 * 60 * MINUTE,
        reply,
        kind === 'escalated' ? ['escalated'] : [],
      );
    } else if (n < 160) {
      const robot = [
        { from: customer, headers: { 'Auto-Submitted': 'auto-replied' } },
        { from: 'no-reply@shop-notifications.example' },
        { from: customer, headers: { 'List-Id': '<news.shop.example>' } },
        { from: customer, headers: { Precedence: 'bulk' } },
      ][n % 4]!;
      await inbound(n, { ...robot, text: `An automatic message [#${n}]` });
    } else if (n < 180) {
      // Bursts: two messages of one sender 20 s apart in one thread; the second's reply covers both.
      if (n % 2 === 0) {
        const first = await inbound(n, { from: customer, text: `${questions[n % questions.length]} [#${n}]` });
        const second = await h.sandbox.inbound({
          inbox_id: inbox,
          deliver: false,
          from: customer,
          thread_id: first.thread_id,
          timestamp: at(n, 20_000),
          subject: `Question ${n}`,
          text: `Also, one more thing: ${questions[(n + 1) % questions.length]} [#${n + 1}]`,
        });
        ids[n + 1] = second.message.message_id;
        await answer(n, customer, first.thread_id, 3 * 60 * MINUTE, 'Hello,\n\nBoth answered below.\n\nSupport');
      }
    } else if (n < 198) {
      // Questions no article covers.
      await inbound(n, { from: customer, subject: 'Zquarnvex', text: `Xylofrumpish zquarnvex? [#${n}]` });
    } else if (n === 198) {
      await inbound(n, { from: inbox, text: `A note from ourselves [#${n}]` });
    } else {
      await inbound(n, { from: customer, text: `${questions[3]} [#${n}]` });
    }
  }
}

const modelBehaviours = (extra: Array<Record<string, unknown>> = []) =>
  model.behaviours.set([
    ...extra,
    { match: { contains: '[handoff-me]' }, action: 'handoff', text: 'a person must decide this' },
    {
      match: { contains: '[link-me]' },
      action: 'reply',
      text: 'Hello,\n\nPay here: https://evil.example/pay\n\nSupport',
    },
    { match: { contains: '[raw-me]' }, action: 'raw', text: 'this is not the JSON asked for' },
    { match: { contains: '[slow-me]' }, action: 'delay', ms: 4_000 },
  ] as Parameters<ModelStandIn['behaviours']['set']>[0]);

/** `npm run rehearse` as a process, with the candidate configuration in its environment. */
function rehearseProcess(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'rehearse.ts'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      ...testEnv.temporalVars,
      TEMPORAL_ADDRESS: testEnv.temporalAddress,
      TEMPORAL_NAMESPACE: testEnv.namespace,
      DATABASE_URL: testEnv.databaseUrl,
      AGENTMAIL_API_KEY: h.apiKey,
      AGENTMAIL_BASE_URL: h.sandboxUrl,
      REPLYONCE_WORKFLOW_BUNDLE: testEnv.workflowBundle ?? '',
      DRAFT_PROVIDER: 'openai',
      DRAFT_MODEL: 'gpt-rehearsal-a',
      DRAFT_API_KEY: 'sk-test',
      DRAFT_BASE_URL: `${modelUrl}/v1`,
      DRAFT_TIMEOUT_MS: '1500',
      KNOWLEDGE_INBOX_COLLECTIONS: JSON.stringify({ '*': [COLLECTION] }),
      APPROVAL_REQUIRED_INBOXES: inbox,
      REPLY_COALESCE_MS: String(COALESCE_MS),
      OPERATION_LEASE_MS: '2000',
      LOG_LEVEL: 'warn',
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    if (process.env.TEST_LOG_LEVEL) process.stderr.write(chunk);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    output: async () => {
      const code = await exited;
      return { code, stdout, stderr };
    },
  };
}

async function rehearse(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { code, stdout, stderr } = await rehearseProcess(args, env).output();
  assert.equal(code, 0, `npm run rehearse ${args.join(' ')} failed:\n${stderr}`);
  return stdout;
}

const period = () => ['--inbox', inbox, '--from', from.toISOString(), '--to', to.toISOString()];

/** Model calls whose new message is message n (the conversation before it may quote others). */
const callsFor = (n: number) =>
  model.calls.filter((c) => {
    const prompt = c.messages.map((m) => m.text).join('\n');
    const newMessage = prompt.slice(prompt.lastIndexOf("The customer's new message"));
    return newMessage.includes(`[#${n}]`);
  }).length;

let reportA: RehearsalReport;

describe('a rehearsal of 200 past messages', () => {
  test('produces the report, with AgentMail away for a while and one message it never gives us', async () => {
    modelBehaviours();
    await h.sandbox.setFaults([
      // One message AgentMail will not give us: after the wait, it is reported, and the rest go on.
      { match: { method: 'GET', path: ids[199]! }, action: 'status', status: 503 },
      // AgentMail away for a while: the reads wait and resume.
      { match: { method: 'GET', path: '/threads/', count: 6 }, action: 'status', status: 503 },
    ]);
    const stdout = await rehearse([
      ...period(),
      '--id',
      'rehearsal-a',
      '--read-wait',
      '30s',
      '--concurrency',
      '6',
      '--json',
    ]);
    await h.sandbox.setFaults([]);
    reportA = JSON.parse(stdout) as RehearsalReport;
    const o = reportA.outcomes;
    assert.equal(reportA.chosen, 200);
    assert.equal(reportA.rehearsed, 200);
    // Robots, lists, bulk mail and our own note are skipped, each with its reason.
    assert.deepEqual(o.skipped.byReason, {
      'auto-submitted': 5,
      'robot-sender': 5,
      'mailing-list': 5,
      'bulk-precedence': 5,
      'from-own-inbox': 1,
    });
    assert.equal(o.covered, 10, 'the first message of each burst is answered with the second');
    // The model's own hand-offs: the ten it was told to make, and the five no article matched.
    assert.deepEqual(o.handedOff.byReason, { model: 15 });
    assert.deepEqual(o.held.byRule, { link: 1 });
    assert.deepEqual(o.modelFailed.byReason, { DraftSchemaViolation: 1, DraftTimeout: 1 });
    assert.equal(o.unreadable.total, 1);
    assert.deepEqual(o.unreadable.messages, [ids[199]]);
    // 140 questions and the second message of each of the 10 bursts.
    assert.equal(o.answered.total, 150);
    assert.equal(o.answered.afterApproval, 150, 'an approval inbox: every reply waits for a reviewer');
    // The agent would answer what the team took three days over, or escalated.
    const quicker = new Set(reportA.agentWouldAnswer.map((a) => a.messageId));
    assert.ok(quicker.has(ids[10]!) && quicker.has(ids[11]!), 'a slow and an escalated answer are listed');
    assert.ok(!quicker.has(ids[13]!), 'an answer within hours is not');
    // The agent hands off what the team answered in one line.
    assert.equal(reportA.handedOffOneLiners.length, 10);
    assert.equal(reportA.contentGaps.length, 5);
    assert.ok(reportA.contentGaps.every((g) => /Xylofrumpish/.test(g.question)));
    assert.equal(reportA.model.calls, 150 + 10 + 5 + 1 + 2);
    assert.ok(reportA.model.inputTokens > 0 && !reportA.model.tokensEstimated);
    // Each drafted message: one model call.
    for (const n of [0, 5, 101, 161, 185, 190, 191]) assert.equal(callsFor(n), 1, `message ${n} was drafted once`);
    assert.equal(callsFor(160), 0, 'a covered message is not drafted');
    assert.equal(callsFor(150), 0, 'a robot is not drafted');
  });

  test('writes nothing anywhere: no send, draft or label at AgentMail; no ticket, comment, notification or budget', async () => {
    assert.deepEqual(await h.sandbox.writes(), []);
    assert.equal((await h.sandbox.outbox()).length, 0);
    const counts = await h.db.query<{ tickets: number; operations: number; reservations: number }>(
      `SELECT (SELECT count(*)::int FROM tickets WHERE inbox_id = $1) AS tickets,
              (SELECT count(*)::int FROM operations WHERE operation_key LIKE $2) AS operations,
              (SELECT count(*)::int FROM reply_reservations WHERE inbox_id = $1) AS reservations`,
      [inbox, `%${inbox}%`],
    );
    assert.deepEqual(counts.rows[0], { tickets: 0, operations: 0, reservations: 0 });
    // Every key the rehearsal wrote is its own (rehearsal/<id>/…), in its own table.
    const keys = await h.db.query<{ key: string }>(
      `SELECT operation_key AS key FROM rehearsal_results WHERE rehearsal_id = 'rehearsal-a'`,
    );
    assert.equal(keys.rowCount, 200);
    assert.ok(keys.rows.every((r) => r.key.startsWith('rehearsal/rehearsal-a/')));
  });

  test('the report as Markdown, and a second start with the same id is the same rehearsal', async () => {
    const before = model.calls.length;
    const markdown = await rehearse([...period(), '--id', 'rehearsal-a', '--read-wait', '30s']);
    assert.equal(model.calls.length, before, 'nothing is drafted again');
    assert.match(markdown, /# Rehearsal rehearsal-a/);
    assert.match(markdown, /\| answered \| 150 \(150 after a reviewer's approval\) \|/);
    assert.match(markdown, /Questions no article covered \(5\)/);
    const other = await rehearseProcess([...period(), '--id', 'rehearsal-a', '--limit', '10']).output();
    assert.equal(other.code, 1);
    assert.match(other.stderr, /already exists with a different limit or sample/);
  });

  test('a comparison of two configurations lists exactly the messages whose outcome changed', async () => {
    // The candidate: another model, which hands off three questions it answered before, and links
    // to evil.example allowed (the held draft would go out).
    modelBehaviours([{ match: { contains: '[b-handoff]' }, action: 'handoff', text: 'the candidate hands this off' }]);
    await rehearse([...period(), '--id', 'rehearsal-b', '--concurrency', '6'], {
      DRAFT_MODEL: 'gpt-rehearsal-b',
      DRAFT_ALLOWED_LINK_DOMAINS: 'evil.example',
    });
    const comparison = JSON.parse(await rehearse(['--compare', 'rehearsal-a', 'rehearsal-b', '--json'])) as Comparison;
    assert.equal(comparison.compared, 200);
    const changed = new Map(comparison.changed.map((c) => [c.messageId, c]));
    assert.deepEqual(
      new Set(changed.keys()),
      new Set([ids[20], ids[21], ids[22], ids[190], ids[199]]),
      'the three new hand-offs, the held draft now allowed, the message A could not read',
    );
    assert.ok(changed.get(ids[20]!)!.changes.includes('new hand-off'));
    assert.ok(changed.get(ids[20]!)!.changes.includes('draft changed'));
    assert.match(changed.get(ids[190]!)!.changes[0]!, /held \(link\) → answered \(approval\)/);
    assert.match(changed.get(ids[199]!)!.changes[0]!, /unreadable/);
  });
});

describe('a worker killed mid-run', () => {
  test('resumes with every message drafted once (the model stand-in counts the calls)', async () => {
    modelBehaviours([{ match: {}, action: 'delay', ms: 300 }]);
    model.calls.length = 0;
    const args = [...period(), '--id', 'rehearsal-crash', '--concurrency', '8'];
    const first = rehearseProcess(args);
    const completeNow = async () =>
      (
        await h.db.query<{ id: string }>(
          `SELECT message_id AS id FROM rehearsal_results WHERE rehearsal_id = 'rehearsal-crash' AND status = 'complete' AND outcome IN ('answered', 'handed-off', 'held', 'model-failed')`,
        )
      ).rows.map((r) => r.id);
    await eventually(
      async () => ((await completeNow()).length >= 30 ? true : undefined),
      '30 messages drafted',
      60_000,
    );
    first.child.kill('SIGKILL');
    await first.exited;
    const storedBeforeKill = new Set(await completeNow());
    assert.ok(storedBeforeKill.size < 170, 'killed mid-run');

    await rehearse(args);
    const rows = await h.db.query<{ id: string; outcome: string; attempts: number }>(
      `SELECT message_id AS id, outcome, attempts FROM rehearsal_results WHERE rehearsal_id = 'rehearsal-crash' AND status = 'complete'`,
    );
    assert.equal(rows.rowCount, 200, 'every message has its one result');
    const byId = new Map(ids.map((id, n) => [id, n]));
    let takenOver = 0;
    for (const row of rows.rows) {
      if (!['answered', 'handed-off', 'held', 'model-failed'].includes(row.outcome)) continue;
      const n = byId.get(row.id)!;
      const calls = callsFor(n);
      // A message stored before the kill is never drafted again; one the kill caught mid-draft was
      // claimed again once its lease ran out (the one inherent second call: its answer was lost).
      if (storedBeforeKill.has(row.id)) assert.equal(calls, 1, `message ${n} stored before the kill was drafted once`);
      else assert.ok(calls >= 1 && calls <= row.attempts, `message ${n}: ${calls} calls for ${row.attempts} claims`);
      if (row.attempts > 1) takenOver += 1;
    }
    assert.ok(takenOver <= 8, `at most the messages in flight were claimed again (${takenOver})`);
    assert.deepEqual(await h.sandbox.writes(), []);
  });
});

describe('the desk page', () => {
  const skip = !existsSync(CHROMIUM) ? `Chromium is not installed at ${CHROMIUM}` : false;
  let browser: Browser | undefined;
  after(async () => browser?.close());

  test("shows the report and its chart to the inbox's reviewers only, accessibly", { skip }, async () => {
    const { app: desk, url } = await startDesk(h);
    try {
      const reviewer = await addReviewer(h.db, { name: 'Rehearsal Reviewer', inboxes: [inbox] });
      const stranger = await addReviewer(h.db, { name: 'Other Inbox', inboxes: ['other@sandbox.agentmail.local'] });
      browser = await launchChromium();
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await signIn(context, url, reviewer.token);
      // Reached from the queue, as a reviewer finds it.
      await page.getByRole('link', { name: 'Rehearsals' }).click();
      await page.waitForURL(`${url}/rehearsals`);
      const response = await page.goto(`${url}/rehearsals/rehearsal-a`);
      assert.equal(response?.status(), 200);
      assert.equal(await page.getByRole('img', { name: 'Outcomes by reason' }).count(), 1);
      assert.match(await page.locator('main').innerText(), /Answered\s*150/);
      assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
      // test-artifacts/ like the other browser tests; docs/images/rehearsal-report.png is a copy of it.
      mkdirSync(path.join(ROOT, 'test-artifacts'), { recursive: true });
      await page.screenshot({
        path: path.join(ROOT, 'test-artifacts', 'rehearsal-report.png'),
        clip: { x: 0, y: 0, width: 1280, height: 900 },
      });
      const compared = await page.goto(`${url}/rehearsals/rehearsal-a?against=rehearsal-b`);
      assert.equal(compared?.status(), 200);
      assert.equal(await page.locator('tbody tr').count(), 5);
      assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
      const list = await page.goto(`${url}/rehearsals`);
      assert.equal(list?.status(), 200);
      assert.equal(await page.getByRole('link', { name: 'rehearsal-a' }).count(), 1);

      const otherContext = await browser.newContext();
      const other = await signIn(otherContext, url, stranger.token);
      assert.equal((await other.goto(`${url}/rehearsals/rehearsal-a`))?.status(), 404);
      await other.goto(`${url}/rehearsals`);
      assert.equal(await other.getByRole('link', { name: 'rehearsal-a' }).count(), 0);
    } finally {
      await desk.close();
    }
  });
});

describe('deletion', () => {
  test('on request, with everything the rehearsal holds', async () => {
    assert.match(await rehearse(['--delete', 'rehearsal-crash']), /deleted rehearsal rehearsal-crash/);
    const left = await h.db.query(
      `SELECT 1 FROM rehearsal_results WHERE rehearsal_id = 'rehearsal-crash' UNION ALL SELECT 1 FROM rehearsal_messages WHERE rehearsal_id = 'rehearsal-crash'`,
    );
    assert.equal(left.rowCount, 0);
    const report = await rehearseProcess(['--report', 'rehearsal-crash']).output();
    assert.equal(report.code, 1);
  });

  test('after REHEARSAL_RETENTION: an expired rehearsal is gone at the next start', async () => {
    await h.db.query(
      `UPDATE rehearsals SET expires_at = now() - interval '1 second' WHERE rehearsal_id = 'rehearsal-b'`,
    );
    await rehearse([...period(), '--id', 'rehearsal-small', '--limit', '5']);
    const left = await h.db.query(`SELECT 1 FROM rehearsal_results WHERE rehearsal_id = 'rehearsal-b'`);
    assert.equal(left.rowCount, 0);
  });
});

describe('a period bigger than the limit', () => {
  test('--limit rehearses the first messages and says the period holds more', async () => {
    const report = JSON.parse(await rehearse(['--report', 'rehearsal-small', '--json'])) as RehearsalReport;
    assert.equal(report.chosen, 5);
    assert.equal(report.rehearsal.truncated, true);
    const chosen = await h.db.query<{ id: string }>(
      `SELECT message_id AS id FROM rehearsal_messages WHERE rehearsal_id = 'rehearsal-small' ORDER BY position`,
    );
    assert.deepEqual(
      chosen.rows.map((r) => r.id),
      ids.slice(0, 5),
    );
    assert.match(await rehearse(['--report', 'rehearsal-small']), /the period holds more than the limit of 5/);
  });

  test('--sample rehearses a sample spread over the whole period', async () => {
    const report = JSON.parse(
      await rehearse([...period(), '--id', 'rehearsal-sample', '--sample', '20', '--json']),
    ) as RehearsalReport;
    assert.equal(report.chosen, 20);
    assert.equal(report.rehearsed, 20);
    assert.equal(report.rehearsal.sampled, true);
    assert.equal(report.rehearsal.listedTotal, 200, 'the whole period was listed');
    const chosen = await h.db.query<{ id: string }>(
      `SELECT message_id AS id FROM rehearsal_messages WHERE rehearsal_id = 'rehearsal-sample' ORDER BY position`,
    );
    const seeds = chosen.rows.map((r) => ids.indexOf(r.id));
    assert.ok(seeds.every((n) => n >= 0));
    assert.deepEqual(
      seeds,
      [...seeds].sort((a, b) => a - b),
      'rehearsed oldest first',
    );
    assert.ok(Math.max(...seeds) >= 100 && Math.min(...seeds) < 100, `spread over the period: ${seeds.join(', ')}`);
    const tooMany = await rehearseProcess([...period(), '--sample', '50000']).output();
    assert.equal(tooMany.code, 1);
    assert.match(tooMany.stderr, /--sample must be a whole number from 1 to 5000/);
  });
});

describe('a customer forgotten', () => {
  test('their rehearsed results go with the erasure (privacy/erase.ts calls this)', async () => {
    const theirs = [{ inboxId: inbox, messageId: ids[7]! }];
    const count = async () =>
      (
        await h.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM rehearsal_results WHERE message_id = $1 AND result::text LIKE '%[#7]%'`,
          [ids[7]],
        )
      ).rows[0]?.n ?? 0;
    const before = await count();
    assert.ok(before >= 1, 'rehearsal-a holds their words');
    assert.equal(await eraseRehearsedMessages(h.db, theirs), before);
    assert.equal(await count(), 0);
    assert.equal(await eraseRehearsedMessages(h.db, theirs), 0, 'a second erasure finds nothing');
  });
});

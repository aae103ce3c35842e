// Every recorded history of every kept build (test/histories/<build id>/*.json, written by
// `npm run histories:record`) replayed against the current workflow code with
// Worker.runReplayHistories: a change to the workflow's commands that would wedge an open run
// with a non-determinism error fails here, naming the history, instead of in production.
// Message runs are pinned (Worker Versioning), so a new build need not replay an old build's
// *open* runs; these replays are what says a change is safe without it: a patch, or a hotfix
// deployed under the same build id, or a pinned run moved to a new build by hand.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../worker/create-worker';
import { testEnv } from './support/env';
import { historyFromFile, type History } from './support/history-json';
import { EXTRA_STEP_INTERCEPTOR } from './support/extra-step';
import { RECORDED_MAIL, SCENARIOS } from './histories/scenarios';

const HISTORIES = path.join(__dirname, 'histories');

export interface RecordedHistory {
  /** `<build id>/<scenario>`: what a failure names. */
  name: string;
  build: string;
  history: History;
}

export function recordedHistories(): RecordedHistory[] {
  const builds = readdirSync(HISTORIES, { withFileTypes: true }).filter((entry) => entry.isDirectory());
  return builds.flatMap((build) =>
    readdirSync(path.join(HISTORIES, build.name))
      .filter((file) => file.endsWith('.json') && file !== 'migrations.json')
      .sort()
      .map((file) => ({
        name: `${build.name}/${file.replace(/\.json$/, '')}`,
        build: build.name,
        history: historyFromFile(JSON.parse(readFileSync(path.join(HISTORIES, build.name, file), 'utf8'))),
      })),
  );
}

/** Replays each history; returns the failures as `name: error`, in order. */
async function replayAll(bundle: { codePath: string } | { code: string }, histories: RecordedHistory[]) {
  const failures: string[] = [];
  const replayed: string[] = [];
  const results = Worker.runReplayHistories(
    { workflowBundle: bundle, replayName: 'replay-histories' },
    histories.map(({ name, history }) => ({ workflowId: name, history })),
  );
  for await (const result of results) {
    replayed.push(result.workflowId);
    if (result.error) failures.push(`${result.workflowId}: ${result.error.name}: ${result.error.message}`);
  }
  return { replayed, failures };
}

let histories: RecordedHistory[];
let current: { codePath: string } | { code: string };
before(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  histories = recordedHistories();
  // The suite's bundle (npm test builds it once), or one built here, with the workers' interceptors.
  current = testEnv.workflowBundle
    ? { codePath: testEnv.workflowBundle }
    : await bundleWorkflowCode({
        workflowsPath: require.resolve('../workflows'),
        workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
        logger: new DefaultLogger('WARN'),
      });
});

describe('recorded histories replay against the current workflow code', () => {
  test('there is a recorded set, and it covers every path of the scenario table', async () => {
    assert.ok(histories.length > 0, 'test/histories/ holds histories (npm run histories:record)');
    const builds = [...new Set(histories.map((h) => h.build))];
    // The newest build's set is complete: every scenario was recorded.
    const newest = builds
      .map((build) => ({ build, at: Math.max(...histories.filter((h) => h.build === build).map(startedAt)) }))
      .sort((a, b) => b.at - a.at)[0]!.build;
    const recorded = histories.filter((h) => h.build === newest).map((h) => h.name.slice(newest.length + 1));
    assert.deepEqual(recorded.sort(), SCENARIOS.map((s) => s.name).sort(), `the set of ${newest}`);
  });

  test('every history of every kept build replays without a non-determinism', async () => {
    const { replayed, failures } = await replayAll(current, histories);
    assert.deepEqual(failures, [], `histories that no longer replay:\n${failures.join('\n')}`);
    assert.equal(replayed.length, histories.length);
  });

  test('the check can fail: a build with an extra step before the send fails the histories that reached the send, naming them', async () => {
    // The rolling-deploy test's build B (test/support/extra-step.ts): an extra timer before each send.
    const changed = await bundleWorkflowCode({
      workflowsPath: require.resolve('../workflows'),
      workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES, EXTRA_STEP_INTERCEPTOR],
      logger: new DefaultLogger('WARN'),
    });
    const sending = histories.filter((h) => sentAReply(h));
    assert.ok(sending.length > 0, 'some recorded runs reached the send');
    const { failures } = await replayAll({ code: changed.code }, sending);
    assert.equal(failures.length, sending.length, failures.join('\n'));
    for (const [i, failure] of failures.entries()) {
      assert.ok(failure.startsWith(`${sending[i]!.name}: `), failure);
      assert.match(failure, /DeterminismViolationError|[Nn]ondeterminis/);
    }
  });
});

describe('recorded histories hold ids and keys only', () => {
  test("no history holds the recorded mail's sender, subject, body or a reviewer's edit, payloads decoded", () => {
    const forbidden = [
      RECORDED_MAIL.text,
      RECORDED_MAIL.subject,
      RECORDED_MAIL.edit,
      RECORDED_MAIL.senderPrefix,
      `@${RECORDED_MAIL.senderDomain}`,
      'parcel 4411',
    ];
    let payloads = 0;
    for (const { name, history } of histories) {
      const texts: string[] = [];
      const visit = (value: unknown): void => {
        if (typeof value === 'string') texts.push(value);
        else if (value instanceof Uint8Array) {
          payloads += 1;
          texts.push(Buffer.from(value).toString('utf8'));
        } else if (value && typeof value === 'object') for (const child of Object.values(value)) visit(child);
      };
      visit(history);
      const text = texts.join('\n');
      for (const needle of forbidden) assert.ok(!text.includes(needle), `${name} holds "${needle}"`);
    }
    // A scan of no payloads would prove nothing: inputs, results and markers were all read.
    assert.ok(payloads > histories.length * 5, `${payloads} payloads scanned`);
  });
});

function startedAt(h: RecordedHistory): number {
  const time = h.history.events?.[0]?.eventTime;
  return time?.seconds ? Number(time.seconds) : 0;
}

function sentAReply(h: RecordedHistory): boolean {
  return (h.history.events ?? []).some((event) =>
    ['sendReply', 'sendApprovedDraft'].includes(event.activityTaskScheduledEventAttributes?.activityType?.name ?? ''),
  );
}

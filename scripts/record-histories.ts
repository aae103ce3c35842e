// `npm run histories:record`: runs every scenario of test/histories/scenarios.ts on the test stack
// (a fresh Temporal dev server and database, as `npm test` starts them; this file runs under its
// runner) and writes each run's history to test/histories/<build id>/<scenario>.json, the build id
// being this checkout's (worker/deployment.ts; WORKER_BUILD_ID overrides). A release keeps its set:
// test/replay-histories.test.ts replays every build's folder against the current code.
//
// Histories hold ids and keys only. The one text a run's history carries is a reviewer's edit (the
// review Update's `text` and the verdict recordReview stores; docs/changing-the-workflow.md): the
// recorder replaces it with a placeholder. The workflow only asks whether there is an edit, so the
// replay takes the same path.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { inboundWorkflowId } from '../lib/hashing';
import { testEnv } from '../test/support/env';
import { Harness, type HarnessOptions } from '../test/support/harness';
import { RECORDED_MAIL, SCENARIOS, type ScenarioContext } from '../test/histories/scenarios';
import { workerBuildId } from '../worker/deployment';
import { MIGRATIONS_DIR } from './db-migrate';

const buildId = workerBuildId();
const folder = path.resolve(__dirname, '..', 'test', 'histories', buildId);
const only = process.env.HISTORIES_ONLY?.split(',').filter(Boolean);

const harnesses = new Map<string, Promise<Harness>>();
const harnessFor = (options: HarnessOptions = {}) => {
  const key = JSON.stringify(options, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) && v.constructor !== Object ? v.constructor.name : v,
  );
  let started = harnesses.get(key);
  if (!started) harnesses.set(key, (started = Harness.start(options)));
  return started;
};
after(async () => {
  for (const started of harnesses.values()) await (await started.catch(() => undefined))?.close();
});

/** The placeholder that replaces a reviewer's edited text in the recorded review Update. */
export const REDACTED_EDIT = '[edit redacted by the recorder]';

interface JsonEvent {
  [attributes: string]: unknown;
}
/** The history as `temporal workflow show --output json` writes it: the JSON Worker.runReplayHistories reads. */
function historyJson(workflowId: string): { events: JsonEvent[] } {
  const cli = path.resolve(__dirname, 'temporal');
  const out = execFileSync('bash', [cli, 'workflow', 'show', '--workflow-id', workflowId, '--output', 'json'], {
    env: { ...process.env, ...testEnv.temporalVars, TEMPORAL_ADDRESS: testEnv.temporalAddress },
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out.toString('utf8')) as { events: JsonEvent[] };
}

/**
 * Replaces every `text` string inside every payload (the review Update's input, and the verdict
 * the recordReview activity is given and returns) with {@link REDACTED_EDIT}. The workflow reads
 * only whether an edit exists (`text !== null`), so the replay takes the same path.
 */
function redactEdits(history: { events: JsonEvent[] }): void {
  const redact = (value: unknown): boolean => {
    if (!value || typeof value !== 'object') return false;
    let changed = false;
    for (const [key, child] of Object.entries(value)) {
      if (key === 'text' && typeof child === 'string') {
        (value as Record<string, unknown>)[key] = REDACTED_EDIT;
        changed = true;
      } else changed = redact(child) || changed;
    }
    return changed;
  };
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    const payload = node as { metadata?: unknown; data?: unknown };
    if (payload.metadata && typeof payload.data === 'string') {
      let value: unknown;
      try {
        value = JSON.parse(Buffer.from(payload.data, 'base64').toString('utf8'));
      } catch {
        return; // not a JSON payload
      }
      if (redact(value)) payload.data = Buffer.from(JSON.stringify(value)).toString('base64');
      return;
    }
    for (const child of Object.values(node)) visit(child);
  };
  visit(history);
}

describe(`recording histories for build ${buildId} into test/histories/${buildId}/`, () => {
  // A full recording replaces the build's set; HISTORIES_ONLY=a,b re-records those scenarios alone.
  if (only === undefined) rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  // The schema this build reads: test/migrations-expand-only.test.ts keeps the next release additive to it.
  const migrations = readdirSync(MIGRATIONS_DIR)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  writeFileSync(path.join(folder, 'migrations.json'), `${JSON.stringify(migrations, null, 2)}\n`);
  for (const scenario of SCENARIOS) {
    test(scenario.name, { skip: only !== undefined && !only.includes(scenario.name) }, async () => {
      const h = await harnessFor(scenario.harness);
      const ctx: ScenarioContext = {
        h,
        mail: async (options = {}) => {
          const inboxId = options.inbox ?? h.newInbox();
          const inbound = await h.sandbox.inbound({
            inbox_id: inboxId,
            from: `Recorded Customer <${RECORDED_MAIL.senderPrefix}${randomUUID().slice(0, 8)}@${RECORDED_MAIL.senderDomain}>`,
            subject: RECORDED_MAIL.subject,
            text: RECORDED_MAIL.text,
            ...(options.headers ? { headers: options.headers } : {}),
            ...(options.thread ? { thread_id: options.thread, from: options.from } : {}),
            ...(options.timestamp ? { timestamp: options.timestamp } : {}),
            deliver: options.deliver ?? true,
          });
          return { inboxId, messageId: inbound.message.message_id, eventId: inbound.event_id };
        },
      };
      const { ref, ended } = await scenario.run(ctx);
      const message = h.client.workflow.getHandle(inboundWorkflowId(ref));
      assert.notEqual((await message.describe()).status.name, 'RUNNING', `${scenario.name} ended (${ended})`);
      const history = historyJson(message.workflowId);
      redactEdits(history);
      writeFileSync(path.join(folder, `${scenario.name}.json`), `${JSON.stringify(history, null, 2)}\n`);
      console.error(`[record] ${scenario.name}: ${ended}, ${history.events.length} events`);
    });
  }
});

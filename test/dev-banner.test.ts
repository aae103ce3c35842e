// The `npm run dev` banner's commands, run exactly as printed against a stack like the dev one
// (the suite's Temporal and Postgres, a sandbox, the API and a worker on ports of their own, so
// every variable a command needs must be in the printed line: the environment they run in has none).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bannerCommands, devBanner, renderBanner, type DevBannerOptions } from '../scripts/services/dev-banner';
import { DEFAULT_DEV_DATABASE_URL } from '../scripts/services/postgres';
import { testEnv } from './support/env';
import { Harness } from './support/harness';

const ROOT = path.resolve(__dirname, '..');
let h: Harness;

before(async () => {
  h = await Harness.start({ approvalInboxes: ['*'] });
});
after(async () => {
  await h?.close();
});

const portOf = (url: string) => Number(new URL(url).port);

function banner(overrides: Partial<DevBannerOptions> = {}) {
  return devBanner({
    namespace: testEnv.namespace,
    taskQueue: h.taskQueue,
    useSandbox: true,
    temporalUi: undefined,
    temporalAddress: testEnv.temporalAddress,
    databaseUrl: process.env.DATABASE_URL as string,
    sandboxApiKey: h.apiKey,
    ports: { api: portOf(h.apiUrl), sandbox: portOf(h.sandboxUrl), temporal: 0, temporalUi: 0, desk: 3300 },
    env: { APPROVAL_REQUIRED_INBOXES: '*', KNOWLEDGE_DIR: 'examples/knowledge' },
    reviewerToken: null,
    coalesceMs: 5_000,
    ...overrides,
  });
}

/** Runs one printed line in bash, in the checkout, with no variable of the stack in its environment. */
function run(command: string): Promise<{ code: number | null; output: string }> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(DATABASE_URL|TEMPORAL_|AGENTMAIL_)/.test(name)),
  );
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', command], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('the dev banner', () => {
  test('every command it prints exits 0 as printed', async () => {
    const lines = banner();
    const printed = renderBanner(lines);
    const commands = bannerCommands(lines);
    assert.ok(commands.length >= 5, printed);
    for (const command of commands) {
      assert.ok(printed.includes(command), `printed as run: ${command}`);
      assert.doesNotMatch(command, /<[a-z ]+>|…/, `no placeholder left to fill in: ${command}`);
      const { code, output } = await run(command);
      assert.equal(code, 0, `\`${command}\` exited ${code}:\n${output}`);
    }
  });

  test('approvals point at the review desk, not at a raw Update; the knowledge base and the burst wait are said', () => {
    const printed = renderBanner(banner());
    assert.doesNotMatch(printed, /workflow update execute/);
    assert.match(printed, /decide in the review desk, http:\/\/127\.0\.0\.1:3300/);
    assert.match(printed, /knowledge\s+examples\/knowledge/);
    assert.match(printed, /REPLY_COALESCE_MS \(5 s here\)/);
    assert.match(renderBanner(banner({ env: {} })), /knowledge\s+none \(KNOWLEDGE_DIR/);
    assert.match(
      renderBanner(banner({ coalesceIsDevDefault: true })),
      /REPLY_COALESCE_MS=5000 \(npm run dev's default/,
    );
  });

  test("on the dev stack's own defaults the commands stay short: no DATABASE_URL or Temporal address in front", () => {
    const commands = bannerCommands(
      banner({
        namespace: 'replyonce',
        taskQueue: 'replyonce',
        temporalAddress: '127.0.0.1:7233',
        databaseUrl: DEFAULT_DEV_DATABASE_URL,
      }),
    );
    assert.ok(commands.some((c) => c.startsWith('npm run reviewer -- --dev add --name')));
    assert.ok(commands.some((c) => c.startsWith('npm run temporal -- workflow list')));
  });
});

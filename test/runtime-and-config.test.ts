import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import pino from 'pino';
import { ConfigError, loadApiConfig } from '../lib/config';
import { forwardSdkLog, type Logger } from '../lib/logger';
import { devPorts } from '../scripts/dev';

describe('runtime', () => {
  test('the suite runs on Node 24, the runtime of record (scripts/node picks it)', () => {
    assert.equal(process.versions.node.split('.')[0], '24', `running on Node ${process.version}`);
  });
});

describe('AGENTMAIL_WEBHOOK_SECRET', () => {
  const base = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db' };
  const load = (secret: string) => loadApiConfig({ ...base, AGENTMAIL_WEBHOOK_SECRET: secret });
  const refused = (secret: string, why: RegExp) =>
    assert.throws(
      () => load(secret),
      (error: unknown) =>
        error instanceof ConfigError && /AGENTMAIL_WEBHOOK_SECRET/.test(error.message) && why.test(error.message),
      secret,
    );

  test('a malformed secret stops the API with the variable named, not a verifier stack trace', () => {
    refused('whsec_notbase64!!', /is not base64 after whsec_/);
    refused('whsec_abc', /is not base64 after whsec_/);
    refused('whsec_YWJj', /holds a 3-byte key/);
    refused('sk_live_abc', /must start with whsec_/);
  });

  test('whsec_ alone is refused, not accepted to reject every real webhook', () => {
    refused('whsec_', /has nothing after whsec_/);
  });

  test("a secret in Svix's format is accepted", () => {
    const secret = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
    assert.equal(load(secret).AGENTMAIL_WEBHOOK_SECRET, secret);
  });
});

describe('logs a person can follow', () => {
  const repoRoot = path.resolve(__dirname, '..');
  const validApiEnv = {
    DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
    AGENTMAIL_WEBHOOK_SECRET: `whsec_${Buffer.alloc(24, 7).toString('base64')}`,
  };
  /** What a process printing two lines with createLogger writes to stdout, with LOG_FORMAT and an optional preload. */
  function logOutput(env: Record<string, string>, preload?: string): string {
    const program =
      "const { createLogger } = require('./lib/logger'); const log = createLogger('probe'); log.info({ workflowId: 'wf-1' }, 'decided: reply'); log.warn('careful');";
    return execFileSync(
      process.execPath,
      ['--import', 'tsx', ...(preload ? ['--require', preload] : []), '--eval', program],
      { cwd: repoRoot, env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' },
    );
  }

  test('LOG_FORMAT=pretty prints lines for a person; json (the default) one JSON object a line', () => {
    const pretty = logOutput({ LOG_FORMAT: 'pretty' });
    assert.match(pretty, /^\[[\d:.]+\] INFO \(probe\): decided: reply \{"workflowId":"wf-1"\}$/m);
    assert.throws(() => JSON.parse(pretty.split('\n')[0] ?? ''));
    const json = logOutput({})
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(
      json.map((line) => [line.msg, line.workflowId]),
      [
        ['decided: reply', 'wf-1'],
        ['careful', undefined],
      ],
    );
  });

  test('LOG_FORMAT=pretty without pino-pretty (a production install) warns once and logs JSON', () => {
    // Prepare: a preload that makes pino-pretty unresolvable, as `npm ci --omit=dev` leaves it
    const dir = mkdtempSync(path.join(tmpdir(), 'no-pretty-'));
    const preload = path.join(dir, 'no-pino-pretty.cjs');
    writeFileSync(
      preload,
      `const Module = require('node:module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'pino-pretty') { const e = new Error("Cannot find module 'pino-pretty'"); e.code = 'MODULE_NOT_FOUND'; throw e; }
  return load.call(this, request, ...rest);
};`,
    );
    try {
      // Act
      const lines = logOutput({ LOG_FORMAT: 'pretty' }, preload)
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);

      // Assess
      assert.equal(lines.length, 3);
      assert.match(String(lines[0]?.msg), /LOG_FORMAT=pretty needs pino-pretty.*logging JSON/);
      assert.equal(lines[0]?.level, 40);
      assert.equal(lines[1]?.msg, 'decided: reply');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('LOG_FORMAT other than json or pretty stops a process naming the variable', () => {
    assert.throws(
      () => loadApiConfig({ ...validApiEnv, LOG_FORMAT: 'yaml' }),
      (error: unknown) => error instanceof ConfigError && /LOG_FORMAT/.test(error.message),
    );
    assert.equal(loadApiConfig(validApiEnv).LOG_FORMAT, 'json');
  });

  describe("the Temporal SDK's lines (worker/main.ts's Runtime logger)", () => {
    function capture(level: string): { logger: Logger; lines: Array<Record<string, unknown>> } {
      const lines: Array<Record<string, unknown>> = [];
      const logger = pino(
        { level },
        { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
      );
      return { logger, lines };
    }
    const token = 'CiQ' + 'x'.repeat(200);

    test("at info: no taskToken, the SDK's state changes at debug", () => {
      const { logger, lines } = capture('info');
      forwardSdkLog(logger, { level: 'INFO', message: 'Worker state changed', meta: { state: 'RUNNING' } });
      forwardSdkLog(logger, {
        level: 'INFO',
        message: 'reading the message',
        meta: { taskToken: token, workflowId: 'wf-1', activityType: 'decideReply' },
      });
      assert.deepEqual(
        lines.map((line) => [line.msg, line.workflowId, line.taskToken]),
        [['reading the message', 'wf-1', undefined]],
      );
    });

    test('at debug both stay, for whoever debugs the SDK', () => {
      const { logger, lines } = capture('debug');
      forwardSdkLog(logger, { level: 'INFO', message: 'Worker state changed', meta: { state: 'RUNNING' } });
      forwardSdkLog(logger, { level: 'INFO', message: 'x', meta: { taskToken: token } });
      assert.equal(lines[0]?.level, 20);
      assert.equal(lines[1]?.taskToken, token);
    });

    test('"Workflow failed" names the failure under the activity\'s: its type and message, not `error: {}`', () => {
      const { logger, lines } = capture('info');
      const cause = ApplicationFailure.create({ type: 'MessageNotFound', message: 'AgentMail has no message m-1' });
      const error = new ActivityFailure(
        'Activity task failed',
        'decideReply',
        '1',
        RetryState.NON_RETRYABLE_FAILURE,
        undefined,
        cause,
      );
      forwardSdkLog(logger, { level: 'WARN', message: 'Workflow failed', meta: { error, workflowId: 'wf-1' } });
      assert.equal(lines[0]?.failureType, 'MessageNotFound');
      assert.equal(lines[0]?.error, 'AgentMail has no message m-1');
      assert.equal(lines[0]?.via, 'ActivityFailure');
      assert.equal(lines[0]?.stack, undefined);
    });
  });
});

describe('npm run dev: ports', () => {
  test('the defaults; DEV_PORT_BASE moves all five in order; one variable moves one', () => {
    assert.deepEqual(devPorts({}), { api: 3000, sandbox: 4010, temporal: 7233, temporalUi: 8233, desk: 3300 });
    assert.deepEqual(devPorts({ DEV_PORT_BASE: '5100' }), {
      api: 5100,
      sandbox: 5101,
      temporal: 5102,
      temporalUi: 5103,
      desk: 5104,
    });
    assert.deepEqual(devPorts({ DEV_DESK_PORT: '3999' }).desk, 3999);
    assert.deepEqual(devPorts({ DEV_PORT_BASE: '5100', DEV_TEMPORAL_UI_PORT: '9999' }).temporalUi, 9999);
    assert.deepEqual(devPorts({ DEV_API_PORT: '3300' }).api, 3300);
  });

  test('a port that is not one is refused naming its variable', () => {
    assert.throws(() => devPorts({ DEV_SANDBOX_PORT: 'abc' }), /DEV_SANDBOX_PORT must be a port number/);
    assert.throws(() => devPorts({ DEV_PORT_BASE: '65534' }), /DEV_PORT_BASE must leave room/);
  });
});

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { validDraft } from '../activities/draft/draft-store';
import { createDrafter, type DrafterConfig } from '../activities/draft/drafting/create-drafter';
import type { DraftRequest } from '../activities/draft/drafting/drafter';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { retryAfterMs } from '../activities/failures/retry-after';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { buildModelStandIn, type ModelStandIn } from '../sandbox/model/app';
import type { BehaviourInput } from '../sandbox/model/behaviours';

// The drafter's error mapping, provider by provider, against the model stand-in over real HTTP
// (no Temporal): what each answer becomes, and whether Temporal will retry it.
const API_KEY = 'sk-stand-in';
let standIn: ModelStandIn;
let apiUrl: string;
before(async () => {
  standIn = buildModelStandIn({ apiKey: API_KEY });
  await standIn.app.listen({ port: 0, host: '127.0.0.1' });
  apiUrl = `http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}/v1`;
});
after(() => standIn.app.close());

const request: DraftRequest = {
  inboxId: 'support@example.com',
  messageId: '<m-1@example.com>',
  subject: 'Hello',
  text: 'Where is my order?',
  timestamp: new Date('2025-01-02T03:04:05Z'),
  thread: [],
  knowledge: false,
  articles: [],
};
const config = (overrides: Partial<DrafterConfig> = {}): DrafterConfig => ({
  DRAFT_PROVIDER: 'openai-compatible',
  DRAFT_MODEL: 'stand-in-model',
  DRAFT_BASE_URL: apiUrl,
  DRAFT_API_KEY: API_KEY,
  DRAFT_TIMEOUT_MS: 1_000,
  DRAFT_MAX_OUTPUT_TOKENS: 500,
  DRAFT_INSTRUCTIONS: undefined,
  DRAFT_INBOX_INSTRUCTIONS: {},
  ...overrides,
});

async function failureOf(
  rule: BehaviourInput | null,
  overrides: Partial<DrafterConfig> = {},
): Promise<ApplicationFailure> {
  standIn.behaviours.set(rule ? [{ match: {}, ...rule }] : []);
  try {
    await createDrafter(config(overrides)).draft(request);
  } catch (error) {
    assert.ok(error instanceof ApplicationFailure, `expected an ApplicationFailure, got ${String(error)}`);
    return error;
  } finally {
    standIn.behaviours.clear();
  }
  assert.fail('the draft succeeded');
}

const providers = ['openai', 'anthropic', 'openai-compatible'] as const;
const cases: Array<[string, BehaviourInput, string, boolean]> = [
  ['a refusal', { action: 'refuse' }, 'DraftRefused', true],
  ['an answer cut off at the token limit', { action: 'truncate' }, 'InvalidDraft', true],
  ['a 429', { action: 'rate-limit', retry_after_seconds: 7 }, 'DraftRateLimited', false],
  ['a 500', { action: 'status', status: 500 }, 'DraftProviderUnavailable', false],
  ['a 503', { action: 'status', status: 503 }, 'DraftProviderUnavailable', false],
  ['a dropped connection', { action: 'drop' }, 'DraftProviderUnavailable', false],
  ['an answer slower than DRAFT_TIMEOUT_MS', { action: 'delay', ms: 2_500 }, 'DraftTimeout', false],
  ['a 400 (e.g. the thread exceeds the context)', { action: 'status', status: 400 }, 'DraftRequestRejected', true],
  ['a 404 (an unknown model)', { action: 'status', status: 404 }, 'DraftModelNotFound', false],
];

for (const provider of providers) {
  describe(`DRAFT_PROVIDER=${provider}`, () => {
    test("a normal answer is the model's text, one HTTP request", async () => {
      const before = standIn.calls.length;
      const answer = await createDrafter(config({ DRAFT_PROVIDER: provider })).draft(request);
      assert.match(answer.reply, /Thank you for your message/);
      assert.deepEqual([answer.citations, answer.handoff], [[], null], 'the structured answer, no knowledge base');
      assert.equal(standIn.calls.length - before, 1);
      assert.equal(standIn.calls.at(-1)?.api, provider === 'anthropic' ? 'anthropic-messages' : 'openai-chat');
    });

    for (const [name, rule, type, nonRetryable] of cases) {
      test(`${name} → ${type}, ${nonRetryable ? 'final' : 'retried by Temporal'}; one HTTP request`, async () => {
        const before = standIn.calls.length;
        const failure = await failureOf(rule, { DRAFT_PROVIDER: provider });
        assert.equal(failure.type, type);
        assert.equal(failure.nonRetryable, nonRetryable);
        assert.equal(standIn.calls.length - before, 1, 'the SDK made no retries of its own');
        if (type === 'DraftRateLimited')
          assert.equal(failure.nextRetryDelay, 7_000, 'the Retry-After becomes the next retry delay');
      });
    }

    test('a rejected key → DraftProviderUnauthorized, retried (an operator can fix DRAFT_API_KEY), named in the message', async () => {
      const failure = await failureOf(null, { DRAFT_PROVIDER: provider, DRAFT_API_KEY: 'sk-wrong' });
      assert.equal(failure.type, 'DraftProviderUnauthorized');
      assert.equal(failure.nonRetryable, false);
      assert.match(failure.message, /DRAFT_API_KEY/);
      assert.ok(!failure.message.includes('sk-wrong'), 'the key itself is not in the failure');
    });
  });
}

describe('the output check (validDraft, the one place for it)', () => {
  test('plain text is kept, trimmed', () => {
    assert.equal(validDraft('  Hello,\n\nThanks.  \n', 'm'), 'Hello,\n\nThanks.');
  });
  const bad: Array<[string, string, RegExp]> = [
    ['empty', ' \n ', /is empty/],
    ['HTML', 'Hello <b>there</b>', /contains HTML/],
    ['too long', 'x'.repeat(10_001), /longer than 10000/],
  ];
  for (const [name, text, message] of bad) {
    test(`${name} → InvalidDraft, final`, () => {
      assert.throws(
        () => validDraft(text, 'm'),
        (error: unknown) =>
          error instanceof ApplicationFailure &&
          error.type === 'InvalidDraft' &&
          error.nonRetryable &&
          message.test(error.message),
      );
    });
  }
});

describe('choosing the drafter', () => {
  const env = (extra: Record<string, string>) => ({
    DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
    AGENTMAIL_API_KEY: 'am_test',
    ...extra,
  });

  test('no provider configured: the offline drafter', () => {
    const drafter = createDrafter(loadWorkerConfig(env({})));
    assert.ok(drafter instanceof OfflineDrafter);
  });

  test('a provider that needs a key and a model, without them: a start-up error naming both variables', () => {
    for (const provider of ['openai', 'anthropic']) {
      assert.throws(
        () => loadWorkerConfig(env({ DRAFT_PROVIDER: provider })),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, new RegExp(`DRAFT_API_KEY is required when DRAFT_PROVIDER=${provider}`));
          assert.match(error.message, new RegExp(`DRAFT_MODEL is required when DRAFT_PROVIDER=${provider}`));
          return true;
        },
      );
    }
    assert.throws(
      () => loadWorkerConfig(env({ DRAFT_PROVIDER: 'openai-compatible', DRAFT_MODEL: 'llama3.1' })),
      /DRAFT_BASE_URL is required when DRAFT_PROVIDER=openai-compatible/,
    );
    assert.throws(
      () => loadWorkerConfig(env({ DRAFT_PROVIDER: 'gemini' })),
      /DRAFT_PROVIDER must be one of offline, openai, anthropic, openai-compatible/,
    );
  });

  test("every missing variable is listed at once, the provider's among the others", () => {
    assert.throws(
      () => loadWorkerConfig({ DRAFT_PROVIDER: 'openai', TICKET_PROVIDER: 'zendesk' }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        for (const name of [
          'DATABASE_URL',
          'AGENTMAIL_API_KEY',
          'DRAFT_API_KEY',
          'DRAFT_MODEL',
          'ZENDESK_URL',
          'ZENDESK_EMAIL',
          'ZENDESK_API_TOKEN',
        ])
          assert.match(error.message, new RegExp(`- ${name} `));
        return true;
      },
    );
  });

  test('a local OpenAI-compatible server needs no key; per-inbox instructions come inline or from a file', () => {
    const inline = loadWorkerConfig(
      env({
        DRAFT_PROVIDER: 'openai-compatible',
        DRAFT_MODEL: 'llama3.1',
        DRAFT_BASE_URL: 'http://127.0.0.1:11434/v1',
        DRAFT_INBOX_INSTRUCTIONS: '{"Billing@Example.com": "Be brief."}',
      }),
    );
    assert.deepEqual(inline.DRAFT_INBOX_INSTRUCTIONS, { 'billing@example.com': 'Be brief.' });
    assert.equal(createDrafter(inline).name, 'openai-compatible:llama3.1');

    const file = path.join(mkdtempSync(path.join(tmpdir(), 'replyonce-')), 'instructions.json');
    writeFileSync(file, JSON.stringify({ 'sales@example.com': 'Offer a call.' }));
    assert.deepEqual(loadWorkerConfig(env({ DRAFT_INBOX_INSTRUCTIONS: file })).DRAFT_INBOX_INSTRUCTIONS, {
      'sales@example.com': 'Offer a call.',
    });
    assert.throws(
      () => loadWorkerConfig(env({ DRAFT_INBOX_INSTRUCTIONS: '{"a@b.c": ' })),
      /DRAFT_INBOX_INSTRUCTIONS is not valid JSON/,
    );
    assert.throws(
      () => loadWorkerConfig(env({ DRAFT_INBOX_INSTRUCTIONS: '{"a@b.c": 3}' })),
      /DRAFT_INBOX_INSTRUCTIONS must be a JSON object/,
    );
    assert.throws(
      () => loadWorkerConfig(env({ DRAFT_INBOX_INSTRUCTIONS: '/nonexistent/instructions.json' })),
      /DRAFT_INBOX_INSTRUCTIONS names a file that cannot be read/,
    );
  });
});

describe('Retry-After', () => {
  test("seconds, an HTTP date and OpenAI's retry-after-ms are read; a huge value is capped", () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    assert.equal(retryAfterMs({ 'retry-after': '3' }, now), 3_000);
    assert.equal(retryAfterMs({ 'retry-after': 'Wed, 01 Jan 2025 00:00:05 GMT' }, now), 5_000);
    assert.equal(retryAfterMs({ 'retry-after-ms': '1500', 'retry-after': '3' }, now), 1_500);
    assert.equal(retryAfterMs({ 'retry-after': '86400' }, now), 10 * 60 * 1000);
    assert.equal(retryAfterMs({ 'retry-after': 'soon' }, now), undefined);
    assert.equal(retryAfterMs(new Headers({ 'Retry-After': '2' }), now), 2_000);
    assert.equal(retryAfterMs(undefined), undefined);
  });
});

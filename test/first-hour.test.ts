// Small truths a newcomer meets in the first hour (issue 38.7): a wrong database password said as
// such, without a stack, by the relay; a burst's reply that does not call itself a continuation;
// the sandbox's index saying how to put a message in a thread.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { OfflineDrafter } from '../activities/draft/drafting/offline-drafter';
import { IntakeRelay, RELAY_DEFAULTS } from '../intake/relay';
import { createDb, postgresAuthenticationFailure } from '../lib/db';
import { buildSandbox } from '../sandbox/app';
import { testEnv } from './support/env';

const databaseUrl = (): string => {
  const value = process.env.DATABASE_URL;
  if (!value) throw new Error('DATABASE_URL is not set: run the suite with `npm test`');
  return value;
};

/** The suite's database URL with a password Postgres does not know. */
function wrongPassword(): { url: string; user: string } {
  const url = new URL(databaseUrl());
  url.password = 'not-the-password';
  return { url: url.toString(), user: decodeURIComponent(url.username) };
}

describe('a wrong database password', () => {
  test('is "authentication failed for user <name>", not an unreachable host', async () => {
    const { url, user } = wrongPassword();
    const db = createDb(url, { max: 1 });
    after(() => db.end());
    const error = await db.query('SELECT 1').then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error !== null, 'Postgres refused the password (the suite cluster checks passwords on TCP)');
    assert.equal(postgresAuthenticationFailure(error), `authentication failed for user ${user}`);
    assert.equal(postgresAuthenticationFailure(new Error('connect ECONNREFUSED 127.0.0.1:1')), null);
  });

  test('the intake relay logs it in one line, naming the user, with no stack', async () => {
    const { url, user } = wrongPassword();
    const db = createDb(url, { max: 1 });
    const connection = await Connection.connect({ address: testEnv.temporalAddress });
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const relay = new IntakeRelay(
      { db, temporal: new Client({ connection, namespace: testEnv.namespace }), taskQueue: 'first-hour', logger },
      { ...RELAY_DEFAULTS, pollMs: 100 },
    );
    relay.start();
    const deadline = Date.now() + 10_000;
    while (lines.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    await relay.close();
    await Promise.all([db.end(), connection.close()]);
    const [line] = lines;
    assert.ok(line, 'the relay said something');
    assert.match(String(line.msg), new RegExp(`authentication failed for user ${user}; trying again`));
    assert.equal(line.err, undefined, 'no error object, so no stack');
    assert.doesNotMatch(JSON.stringify(lines), /\n\s+at /);
  });
});

describe('the offline drafter in a conversation', () => {
  const base = {
    inboxId: 'support@example.com',
    messageId: '<b@customer.example>',
    subject: 'Order',
    text: 'Also, can I change the address?',
    timestamp: new Date(),
    knowledge: false,
    articles: [],
  };

  test('a burst (earlier messages of the customer, none of ours) is not "our earlier conversation"', async () => {
    const { reply } = await new OfflineDrafter().draft({
      ...base,
      thread: [{ direction: 'inbound', text: 'Where is my order?', timestamp: new Date(Date.now() - 5_000) }],
    });
    assert.doesNotMatch(reply, /continues our earlier conversation/);
    assert.match(reply, /It answers your 1 earlier message too\./);
  });

  test('after a reply of ours, it is', async () => {
    const { reply } = await new OfflineDrafter().draft({
      ...base,
      thread: [
        { direction: 'inbound', text: 'Where is my order?', timestamp: new Date(Date.now() - 60_000) },
        { direction: 'outbound', text: 'It ships today.', timestamp: new Date(Date.now() - 30_000) },
      ],
    });
    assert.match(reply, /This continues our earlier conversation \(2 earlier messages\)\./);
  });
});

describe("the sandbox's index", () => {
  test('says how to put a message in a thread', async () => {
    const { app } = buildSandbox({ apiKey: 'k', webhookSecret: 'whsec_AAAA', retryScheduleMs: [0] });
    after(() => app.close());
    const index = (await app.inject({ method: 'GET', url: '/_sandbox' })).json<{
      threads: string;
      controls: Array<{ does: string }>;
    }>();
    assert.match(index.threads, /in_reply_to/);
    assert.match(index.threads, /thread_id/);
    assert.ok(index.controls.some((c) => /`in_reply_to`/.test(c.does) && /`thread_id`/.test(c.does)));
  });
});

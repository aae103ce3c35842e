import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import {
  boundMessageText,
  MAX_RETRIEVAL_QUERIES,
  MESSAGE_TEXT_MAX_CHARS,
  retrieve,
  searchableText,
  textCutNotice,
} from '../knowledge';
import type { Db } from '../lib/db';
import { bundledCollection } from './support/knowledge-collection';

// What one message may cost (issue 39, point 1): a 5,000-line email searched like an ordinary one
// — a bounded number of queries, counted on the suite's real Postgres — and a retrieval that
// heartbeats and stops when its activity is cancelled.
const bundled = bundledCollection('bounds');
const collection = bundled.name;
let db: Db;
before(() => {
  db = bundled.db;
});

/** The same pool, counting the queries sent through it. */
function counting(pool: Db): { db: Db; queries: () => number } {
  let queries = 0;
  const proxy = new Proxy(pool, {
    get(target, property, receiver) {
      if (property === 'query')
        return (...args: unknown[]) => {
          queries += 1;
          return (target.query as (...a: unknown[]) => unknown).apply(target, args);
        };
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
  return { db: proxy, queries: () => queries };
}

const ORDINARY = 'How much is shipping to Sweden, and how long does it take to arrive?';
/** A question, then 5,000 short lines of a pasted log, each different: nothing for de-duplication to fold. */
const HOSTS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel'];
const LONG_EMAIL = [
  'I want to return my tent, how do I send it back?',
  ...Array.from(
    { length: 5_000 },
    (_, i) => `[${100_000 + i}] sync ${HOSTS[i % HOSTS.length]} worker ${i % 24} status ok`,
  ),
].join('\n');

describe('a 5,000-line email costs what an ordinary one does', () => {
  test('the queries of its retrieval are bounded, within a small multiple of an ordinary two-question email', async () => {
    const ordinary = counting(db);
    const found = await retrieve(ordinary.db, { collections: [collection], text: ORDINARY, limit: 5 });
    assert.ok(found.length > 0);
    const long = counting(db);
    const longFound = await retrieve(long.db, { collections: [collection], text: LONG_EMAIL, limit: 5 });
    assert.ok(
      long.queries() <= MAX_RETRIEVAL_QUERIES,
      `${long.queries()} queries for one email (at most ${MAX_RETRIEVAL_QUERIES})`,
    );
    assert.ok(
      long.queries() <= 3 * ordinary.queries(),
      `${long.queries()} queries against ${ordinary.queries()} for an ordinary email`,
    );
    assert.ok(longFound.length > 0);
  });

  test('in another language too: the look-up of its synonym phrases in that language is one query more, within the cap', async () => {
    // German sentences, each different, past MAX_SENTENCE_SEARCHES: the German reading adds one query, not one per sentence.
    const german = Array.from(
      { length: 400 },
      (_, i) => `Ich möchte die Jacke Nummer ${i} zurückschicken, wie lange dauert die Rückgabe bei euch?`,
    ).join('\n');
    const counted = counting(db);
    const found = await retrieve(counted.db, { collections: [collection], text: german, limit: 5 });
    assert.ok(
      counted.queries() <= MAX_RETRIEVAL_QUERIES,
      `${counted.queries()} queries for one email (at most ${MAX_RETRIEVAL_QUERIES})`,
    );
    assert.ok(found.length > 0);
  });

  test('its text is cut at the documented cap, at a line break, and the cut is said', () => {
    const { text, cut } = boundMessageText(LONG_EMAIL);
    assert.ok(text.length <= MESSAGE_TEXT_MAX_CHARS && text.length > MESSAGE_TEXT_MAX_CHARS / 2);
    assert.ok(LONG_EMAIL.startsWith(text) && LONG_EMAIL[text.length] === '\n');
    assert.deepEqual(cut, { keptChars: text.length, totalChars: LONG_EMAIL.length });
    assert.match(textCutNotice(cut), /only its first 1\d,\d{3} were read/);
    assert.deepEqual(boundMessageText(ORDINARY), { text: ORDINARY, cut: null });
  });

  test('a retrieval heartbeats before its queries and stops at the next one once cancelled', async () => {
    const controller = new AbortController();
    const pool = counting(db);
    let heartbeats = 0;
    const retrieval = retrieve(pool.db, {
      collections: [collection],
      text: LONG_EMAIL,
      limit: 5,
      signal: controller.signal,
      heartbeat: () => {
        heartbeats += 1;
        if (heartbeats === 2) controller.abort(new Error('activity cancelled'));
      },
    });
    await assert.rejects(retrieval, /activity cancelled/);
    assert.equal(heartbeats, 2);
    assert.ok(pool.queries() <= 3, `${pool.queries()} queries after the cancellation`);
  });

  test('a signal already aborted: not one query', async () => {
    const pool = counting(db);
    await assert.rejects(
      retrieve(pool.db, { collections: [collection], text: ORDINARY, limit: 5, signal: AbortSignal.abort() }),
      (error: Error) => error.name === 'AbortError',
    );
    assert.equal(pool.queries(), 0);
  });
});

describe('what the search reads of an email', () => {
  test('greetings, sign-offs, signatures and quoted mail are left out; the question is kept', () => {
    const email = [
      'Hi there,',
      'Hello Fernhill team! Do you ship to Norway?',
      '> On Monday you wrote: our summer sale',
      'Thanks in advance',
      'Jane Smith',
      'Head of Purchasing, Example Ltd',
    ].join('\n');
    assert.equal(searchableText(email), 'Do you ship to Norway?');
    assert.equal(searchableText('Hi, my parcel is late.\n--\nSent from my phone'), 'my parcel is late.');
    assert.equal(searchableText('Hei! Hva koster frakten?\nMvh Ola'), 'Hva koster frakten?');
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { Db } from '../lib/db';
import { inboundWorkflowId } from '../lib/hashing';
import { startIngressOnly, type IngressOnly } from './support/ingress-only';
import { messageReceivedPayload, signedHeaders } from './support/signing';
import { workflowExists } from './support/temporal';

// Bad input at the ingress, signed with the right secret (so it passes the signature check and
// reaches the parsing and the stores behind it). The ingress alone, on real Temporal and
// Postgres: no worker polls this task queue, so a started workflow stays visible and inert.
const BODY_LIMIT_BYTES = 256 * 1024;
let ingress: IngressOnly;
let app: FastifyInstance;
let db: Db;
let client: Client;
let secret: string;
/** Workflows the valid inputs started, terminated at the end so none lingers on the server. */
const started = new Set<string>();

describe('bad input at the ingress', () => {
  before(async () => {
    ingress = await startIngressOnly({ bodyLimitBytes: BODY_LIMIT_BYTES });
    ({ app, db, client, secret } = ingress);
  });
  after(async () => {
    for (const workflowId of started)
      await client.workflow
        .getHandle(workflowId)
        .terminate('bad-input test clean-up')
        .catch(() => undefined);
    await ingress.close();
  });

  describe('signed but malformed payloads get the documented answers and start nothing', () => {
    type Payload = ReturnType<typeof messageReceivedPayload>;
    const cases: Array<[string, (p: Payload) => string | Buffer, number]> = [
      ['no message', ({ message: _message, ...rest }) => JSON.stringify(rest), 422],
      ['message is a string', (p) => JSON.stringify({ ...p, message: 'hello' }), 422],
      ['message is null', (p) => JSON.stringify({ ...p, message: null }), 422],
      ['inbox_id is a number', (p) => JSON.stringify({ ...p, message: { ...p.message, inbox_id: 42 } }), 422],
      ['message_id is empty', (p) => JSON.stringify({ ...p, message: { ...p.message, message_id: '' } }), 422],
      [
        'message_id is an array',
        (p) => JSON.stringify({ ...p, message: { ...p.message, message_id: [p.message.message_id] } }),
        422,
      ],
      [
        'message_id longer than RFC 5322 allows',
        (p) => JSON.stringify({ ...p, message: { ...p.message, message_id: `<${'x'.repeat(1000)}@example.com>` } }),
        422,
      ],
      ['no event_id', ({ event_id: _id, ...rest }) => JSON.stringify(rest), 422],
      ['event_id is a number', (p) => JSON.stringify({ ...p, event_id: 12345 }), 422],
      ['event_id of 256 characters', (p) => JSON.stringify({ ...p, event_id: 'e'.repeat(256) }), 422],
      // Postgres text cannot hold U+0000; Temporal refuses search-attribute values over 2 KiB.
      ['event_id with a NUL character', (p) => JSON.stringify({ ...p, event_id: `${p.event_id}\u0000` }), 422],
      [
        'inbox_id with a NUL character',
        (p) => JSON.stringify({ ...p, message: { ...p.message, inbox_id: `${p.message.inbox_id}\u0000` } }),
        422,
      ],
      [
        'message_id of 998 characters but 2994 bytes',
        (p) => JSON.stringify({ ...p, message: { ...p.message, message_id: '中'.repeat(998) } }),
        422,
      ],
      [
        'thread_id over 2 KiB in UTF-8',
        (p) => JSON.stringify({ ...p, message: { ...p.message, thread_id: '😀'.repeat(300) } }),
        422,
      ],
      ['event_type is an object', (p) => JSON.stringify({ ...p, event_type: { name: 'message.received' } }), 422],
      ['a JSON array', (p) => JSON.stringify([p]), 422],
      ['JSON null', () => 'null', 422],
      ['a JSON string', () => '"message.received"', 422],
      ['not JSON (cut short)', (p) => JSON.stringify(p).slice(0, 40), 422],
      ['an empty body', () => '', 422],
      ['JSON in UTF-16', (p) => Buffer.from(JSON.stringify(p), 'utf16le'), 422],
      ['a body over the limit', (p) => JSON.stringify({ ...p, padding: 'x'.repeat(BODY_LIMIT_BYTES) }), 413],
      ['an unknown event_type', (p) => JSON.stringify({ ...p, event_type: 'message.exploded' }), 204],
    ];
    for (const [name, make, expected] of cases) {
      test(`${name} → ${expected}${expected === 204 ? ' (ignored)' : ''}, no workflow`, async () => {
        // Prepare
        const ref = newRef();
        const payload = messageReceivedPayload(ref);
        const body = make(payload);
        // Act
        const response = await post(body);
        // Assess
        assert.equal(response.statusCode, expected, response.body);
        assert.equal(await workflowExists(client, inboundWorkflowId(ref)), false);
        const recorded = await eventOutcome(payload.event_id);
        assert.equal(recorded, expected === 204 ? 'ignored' : undefined);
      });
    }
  });

  test(
    '300 random mutations of a signed payload: never a 5xx, never a crash, and nothing answered 4xx started a workflow',
    { timeout: 120_000 },
    async (t) => {
      // Prepare: a seeded generator, so a failure can be replayed with FUZZ_SEED=<seed>
      const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
      t.diagnostic(`FUZZ_SEED=${seed}`);
      console.log(`bad-input fuzz: FUZZ_SEED=${seed}`);
      const fuzz = new Mutator(seed);
      const serverErrors: string[] = [];
      const startedOn4xx: string[] = [];
      const statuses = new Map<number, number>();

      for (let i = 0; i < 300; i += 1) {
        // Act
        const ref = newRef();
        const { body, description } = fuzz.mutate(messageReceivedPayload(ref));
        const response = await post(body);
        statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
        const candidates = workflowIdsFor(ref, body);

        // Assess (collected, so one run reports every failing mutation)
        const label = `#${i} [${description}] → ${response.statusCode}`;
        if (response.statusCode >= 500) serverErrors.push(`${label} ${response.body.slice(0, 200)}`);
        if (response.statusCode >= 400 && response.statusCode < 500) {
          for (const workflowId of candidates)
            if (await workflowExists(client, workflowId)) startedOn4xx.push(`${label}: ${workflowId}`);
        } else {
          for (const workflowId of candidates) started.add(workflowId);
        }
      }

      t.diagnostic(`answers: ${JSON.stringify(Object.fromEntries(statuses))}`);
      assert.deepEqual(serverErrors, [], `5xx for bad input (FUZZ_SEED=${seed})`);
      assert.deepEqual(startedOn4xx, [], `refused input that started a workflow anyway (FUZZ_SEED=${seed})`);
      assert.equal((await app.inject('/healthz')).statusCode, 200, 'the ingress is still alive');
      assert.equal((await app.inject('/readyz')).statusCode, 200);
    },
  );
});

const newRef = () => ({
  inboxId: `support-${randomUUID().slice(0, 8)}@example.com`,
  messageId: `<${randomUUID()}@mail.example.com>`,
});

/** Signed like Svix: the signature covers the body's UTF-8 reading, as the verifier computes it. */
const post = (body: string | Buffer) =>
  app.inject({
    method: 'POST',
    url: '/webhooks/agentmail',
    payload: body,
    headers: signedHeaders(secret, body.toString()),
  });

async function eventOutcome(eventId: string): Promise<string | undefined> {
  return (await db.query<{ outcome: string }>('SELECT outcome FROM inbound_events WHERE event_id = $1', [eventId]))
    .rows[0]?.outcome;
}

/** Every workflow the input could have started: the original message's, and the mutated ids' if still strings. */
function workflowIdsFor(ref: { inboxId: string; messageId: string }, body: string | Buffer): string[] {
  const ids = new Set([inboundWorkflowId(ref)]);
  try {
    const parsed = JSON.parse(body.toString()) as { message?: { inbox_id?: unknown; message_id?: unknown } } | null;
    const { inbox_id: inboxId, message_id: messageId } = parsed?.message ?? {};
    if (typeof inboxId === 'string' && typeof messageId === 'string')
      ids.add(inboundWorkflowId({ inboxId, messageId }));
  } catch {
    // not JSON: nothing else could have been started
  }
  return [...ids];
}

/** mulberry32: small, fast, and the same sequence for the same seed on every platform. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Strings that have broken parsers, databases and RPC layers before. */
const NASTY_STRINGS = [
  '',
  ' ',
  '\u0000',
  'evt_\u0000_nul',
  '\ud800',
  'lone \udfff surrogate',
  '😀'.repeat(40),
  '中'.repeat(400),
  'e\u0301'.repeat(50),
  '\u202eRTL override',
  'zero\u200bwidth',
  '\r\n\r\nX-Injected: yes',
  "' OR 1=1; --",
  '%s%n%x',
  '../../etc/passwd',
  '<script>alert(1)</script>',
  '__proto__',
  'constructor',
  'message.received',
  '\\u0000',
];

/**
 * Random mutations of a message.received payload: structural ones on the object (drop, retype,
 * nest deeply, unicode, long strings, numbers where strings belong, arrays, null, duplicate
 * keys) and byte-level ones on the serialized body (flip, insert, delete, truncate).
 */
class Mutator {
  private readonly random: () => number;

  constructor(seed: number) {
    this.random = mulberry32(seed);
  }

  mutate(payload: object): { body: string | Buffer; description: string } {
    const value = structuredClone(payload) as { [key: string]: Json };
    const raws = new Map<string, string>();
    const done: string[] = [];
    const structural = 1 + this.int(3);
    for (let n = 0; n < structural; n += 1) done.push(this.structural(value, raws));
    let text = JSON.stringify(value);
    for (const [marker, raw] of raws) text = text.replace(JSON.stringify(marker), raw);
    if (this.random() < 0.4) {
      const bytes = this.bytes(Buffer.from(text, 'utf8'), done);
      return { body: bytes, description: done.join('; ') };
    }
    return { body: text, description: done.join('; ') };
  }

  private structural(root: { [key: string]: Json }, raws: Map<string, string>): string {
    const [path, parent, key] = this.pick(root);
    const op = this.int(11);
    switch (op) {
      case 0:
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key];
        return `drop ${path}`;
      case 1:
        this.set(parent, key, this.value(3));
        return `retype ${path}`;
      case 2: {
        const depth = 100 + this.int(20_000);
        const marker = `__raw_${raws.size}__`;
        const open = this.random() < 0.5 ? '[' : '{"a":';
        raws.set(
          marker,
          open === '['
            ? `${'['.repeat(depth)}${']'.repeat(depth)}`
            : `${'{"a":'.repeat(depth)}null${'}'.repeat(depth)}`,
        );
        this.set(parent, key, marker);
        return `nest ${path} ${depth} deep`;
      }
      case 3:
        this.set(parent, key, this.nasty());
        return `unicode/nasty ${path}`;
      case 4: {
        const length = this.pickOf([300, 999, 1_000, 5_000, 70_000, BODY_LIMIT_BYTES + 10]);
        this.set(parent, key, this.pickOf(['x', 'é', '😀', '中']).repeat(length));
        return `long ${path} ×${length}`;
      }
      case 5:
        this.set(parent, key, this.pickOf([0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, 42]));
        return `number ${path}`;
      case 6:
        this.set(parent, key, [(parent as Record<string, Json>)[key] ?? null]);
        return `array ${path}`;
      case 7:
        this.set(parent, key, null);
        return `null ${path}`;
      case 8: {
        const name = this.random() < 0.3 ? this.nasty() : `x_${this.int(1000)}`;
        (root as Record<string, Json>)[name] = this.value(2);
        return `add field ${JSON.stringify(name).slice(0, 20)}`;
      }
      case 9: {
        // Two event_ids in one object: JSON.parse keeps the last.
        const marker = `__raw_${raws.size}__`;
        raws.set(marker, `${JSON.stringify(root.event_id ?? 'e')}, "event_id": ${JSON.stringify(this.nasty())}`);
        root.event_id = marker;
        return 'duplicate key event_id';
      }
      default:
        this.set(
          parent,
          key,
          this.pickOf(['message.received', 'message.sent', 'message.bounced', 'MESSAGE.RECEIVED', '']),
        );
        return `event-ish string at ${path}`;
    }
  }

  private bytes(buffer: Buffer, done: string[]): Buffer {
    const op = this.int(5);
    const at = this.int(Math.max(1, buffer.length));
    switch (op) {
      case 0: {
        const copy = Buffer.from(buffer);
        const flips = 1 + this.int(5);
        for (let n = 0; n < flips; n += 1) {
          const i = this.int(copy.length);
          copy[i] = (copy[i] ?? 0) ^ (1 << this.int(8));
        }
        done.push(`flip ${flips} bits`);
        return copy;
      }
      case 1: {
        const inserted = Buffer.from(Array.from({ length: 1 + this.int(8) }, () => this.int(256)));
        done.push(`insert ${inserted.length} bytes at ${at}`);
        return Buffer.concat([buffer.subarray(0, at), inserted, buffer.subarray(at)]);
      }
      case 2: {
        const length = 1 + this.int(30);
        done.push(`delete ${length} bytes at ${at}`);
        return Buffer.concat([buffer.subarray(0, at), buffer.subarray(at + length)]);
      }
      case 3:
        done.push(`truncate at ${at}`);
        return buffer.subarray(0, at);
      default: {
        const length = 1 + this.int(40);
        done.push(`repeat ${length} bytes at ${at}`);
        return Buffer.concat([buffer.subarray(0, at + length), buffer.subarray(at)]);
      }
    }
  }

  /** A random place in the payload, weighted towards the fields the ingress reads. */
  private pick(root: { [key: string]: Json }): [string, { [key: string]: Json } | Json[], string] {
    const message = root.message;
    const important = [
      'event_id',
      'event_type',
      'message',
      'message.inbox_id',
      'message.message_id',
      'message.thread_id',
    ];
    const all = [
      ...important,
      'type',
      'thread',
      ...(message && typeof message === 'object' && !Array.isArray(message)
        ? Object.keys(message).map((k) => `message.${k}`)
        : []),
    ];
    const path = this.random() < 0.6 ? this.pickOf(important) : this.pickOf(all);
    const [first, second] = path.split('.') as [string, string | undefined];
    if (second === undefined) return [path, root, first];
    const container = root[first];
    if (container && typeof container === 'object') return [path, container, second];
    // The parent was already retyped or dropped: mutate the parent itself.
    return [first, root, first];
  }

  private set(parent: { [key: string]: Json } | Json[], key: string, value: Json): void {
    (parent as Record<string, Json>)[key] = value;
  }

  private value(depth: number): Json {
    const kind = this.int(depth > 0 ? 7 : 5);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return this.random() < 0.5;
      case 2:
        return this.pickOf([0, -1, 3.14, 1e308, Number.MAX_SAFE_INTEGER, -(2 ** 31)]);
      case 3:
        return this.nasty();
      case 4:
        return Array.from({ length: this.int(8) }, () => String.fromCodePoint(this.codePoint())).join('');
      case 5:
        return Array.from({ length: this.int(4) }, () => this.value(depth - 1));
      default:
        return Object.fromEntries(
          Array.from({ length: this.int(4) }, (_v, i) => [
            this.random() < 0.2 ? this.nasty() : `k${i}`,
            this.value(depth - 1),
          ]),
        );
    }
  }

  /** Any Unicode scalar value (surrogates are NASTY_STRINGS' job). */
  private codePoint(): number {
    const point = this.int(0x10ffff + 1);
    return point >= 0xd800 && point <= 0xdfff ? point - 0x800 : point;
  }

  private nasty(): string {
    return this.pickOf(NASTY_STRINGS);
  }

  private int(below: number): number {
    return Math.floor(this.random() * below);
  }

  private pickOf<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
}

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { AgentMail, AgentMailClient, AgentMailError } from 'agentmail';
import { Webhook } from 'svix';
import { buildSandbox, type Sandbox } from '../sandbox/app';
import { SandboxControl } from '../sandbox/control-client';

// One sandbox and one webhook receiver for the file, both on loopback; state is reset per test.
const API_KEY = 'am_sandbox_test_key';
const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const INBOX = 'support@sandbox.agentmail.local';
const CUSTOMER = 'Ada Lovelace <ada@example.com>';

let sandbox: Sandbox;
let control: SandboxControl;
let client: AgentMailClient;
let baseUrl: string;

interface Received {
  body: string;
  headers: IncomingHttpHeaders;
}
const receiver = {
  server: undefined as Server | undefined,
  url: '',
  requests: [] as Received[],
  statuses: [] as number[],
};

/** An inbound message whose webhook is not delivered (API tests don't need it). */
async function arrive(fields: { subject?: string; text?: string; in_reply_to?: string; message_id?: string } = {}) {
  const { message } = await control.inbound({
    inbox_id: INBOX,
    from: CUSTOMER,
    subject: 'Where is my order?',
    text: 'Order 42 has not arrived.',
    deliver: false,
    ...fields,
  });
  return message;
}

const replyBody = (text = 'It ships today.'): AgentMail.ReplyToMessageRequest => ({
  text,
  headers: { 'Auto-Submitted': 'auto-replied' },
});

// Suite-level hooks: the root's after() would only run once the event loop drains.
describe('AgentMail sandbox', () => {
  before(async () => {
    receiver.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        receiver.requests.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(receiver.statuses.shift() ?? 200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.server?.listen(0, '127.0.0.1', resolve));
    receiver.url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/webhooks/agentmail`;

    sandbox = buildSandbox({
      apiKey: API_KEY,
      webhookSecret: SECRET,
      webhookUrl: receiver.url,
      retryScheduleMs: [0, 100, 300],
    });
    baseUrl = await sandbox.app.listen({ port: 0, host: '127.0.0.1' });
    control = new SandboxControl(baseUrl);
    client = new AgentMailClient({ apiKey: API_KEY, baseUrl, maxRetries: 0, timeoutInSeconds: 10 });
  });

  after(async () => {
    await sandbox.app.close();
    await new Promise((resolve) => receiver.server?.close(resolve));
  });

  beforeEach(async () => {
    await control.reset();
    receiver.requests.length = 0;
    receiver.statuses.length = 0;
  });

  describe('the control index', () => {
    test('GET /_sandbox lists every control route, and every /_sandbox route is listed', async () => {
      const index = (await (await fetch(`${baseUrl}/_sandbox`)).json()) as {
        controls: Array<{ method: string; path: string }>;
      };
      const listed = new Set(index.controls.map((c) => `${c.method} ${c.path}`));
      const served = new Set(sandbox.routes.filter((route) => route.includes(' /_sandbox/')));
      assert.deepEqual([...listed].sort(), [...served].sort());
    });
  });

  describe('reading', () => {
    test('get message decodes RFC 5322 message ids in the path and returns the wire shape', async () => {
      const inbound = await arrive({ message_id: '<a+b/c=d@mail.example.com>' });

      const message = await client.inboxes.messages.get(INBOX, inbound.message_id);

      assert.equal(message.messageId, '<a+b/c=d@mail.example.com>');
      assert.equal(message.from, CUSTOMER);
      assert.deepEqual(message.to, [INBOX]);
      assert.deepEqual(message.labels, ['received', 'unread']);
      assert.equal(message.text, 'Order 42 has not arrived.');
      assert.ok(message.timestamp instanceof Date && !Number.isNaN(message.timestamp.getTime()));
      await assert.rejects(client.inboxes.messages.get(INBOX, '<missing@example.com>'), AgentMail.NotFoundError);
    });

    test('get thread returns its messages oldest first; list pages without overlap', async () => {
      const first = await arrive();
      const second = await arrive({ in_reply_to: first.message_id, text: 'Any news?' });
      await arrive({ subject: 'Another topic' });

      const thread = await client.inboxes.threads.get(INBOX, first.thread_id);
      assert.equal(second.thread_id, first.thread_id);
      assert.deepEqual(
        thread.messages.map((m) => m.messageId),
        [first.message_id, second.message_id],
      );
      assert.equal(thread.messageCount, 2);

      const page1 = await client.inboxes.messages.list(INBOX, { limit: 2 });
      assert.equal(page1.count, 2);
      assert.ok(page1.nextPageToken, 'a first page of 2 out of 3 has a next_page_token');
      const page2 = await client.inboxes.messages.list(INBOX, { limit: 2, pageToken: page1.nextPageToken });
      assert.equal(page2.count, 1);
      assert.equal(page2.nextPageToken, undefined);
      const ids = [...page1.messages, ...page2.messages].map((m) => m.messageId);
      assert.equal(new Set(ids).size, 3);
      assert.equal(
        ids[0],
        (await client.inboxes.messages.list(INBOX, { limit: 1 })).messages[0]?.messageId,
        'newest first',
      );

      const byLabel = await client.inboxes.messages.list(INBOX, { labels: ['sent'] });
      assert.equal(byLabel.count, 0);
    });

    test('messages.list orders by timestamp as AgentMail does, whatever order mail was stored in', async () => {
      // Past mail stored out of time order (an import, a late delivery): the listing follows the timestamps.
      const stored = [3, 1, 4, 2, 5].map((day) => ({ day, at: `2026-11-0${day}T10:00:00.000Z` }));
      const ids = new Map<number, string>();
      for (const { day, at } of stored) {
        const { message } = await control.inbound({ inbox_id: INBOX, from: CUSTOMER, timestamp: at, deliver: false });
        ids.set(day, message.message_id);
      }
      const byDays = (days: number[]) => days.map((d) => ids.get(d));
      const newestFirst = await client.inboxes.messages.list(INBOX, {});
      assert.deepEqual(
        newestFirst.messages.map((m) => m.messageId),
        byDays([5, 4, 3, 2, 1]),
      );
      const page1 = await client.inboxes.messages.list(INBOX, { ascending: true, limit: 2 });
      const page2 = await client.inboxes.messages.list(INBOX, {
        ascending: true,
        limit: 2,
        pageToken: page1.nextPageToken,
      });
      assert.deepEqual(
        [...page1.messages, ...page2.messages].map((m) => m.messageId),
        byDays([1, 2, 3, 4]),
      );
      const period = await client.inboxes.messages.list(INBOX, {
        ascending: true,
        after: new Date('2026-11-01T12:00:00Z'),
        before: new Date('2026-11-04T12:00:00Z'),
      });
      assert.deepEqual(
        period.messages.map((m) => m.messageId),
        byDays([2, 3, 4]),
      );
    });

    test('inboxes.list pages like AgentMail: newest first, limit and page_token, ascending on request', async () => {
      const ids = ['a', 'b', 'c', 'd', 'e'].map((n) => `${n}@sandbox.agentmail.local`);
      for (const id of ids) await control.createInbox(id);
      const first = await client.inboxes.list({ limit: 2 });
      assert.deepEqual([first.count, first.limit], [2, 2]);
      const seen = first.inboxes.map((i) => i.inboxId);
      let token = first.nextPageToken;
      while (token) {
        const page = await client.inboxes.list({ limit: 2, pageToken: token });
        seen.push(...page.inboxes.map((i) => i.inboxId));
        token = page.nextPageToken;
      }
      assert.deepEqual(seen, [...ids].reverse());
      const ascending = await client.inboxes.list({ ascending: true });
      assert.deepEqual(
        ascending.inboxes.map((i) => i.inboxId),
        ids,
      );
      await assert.rejects(client.inboxes.list({ limit: 101 }), (error: unknown) => error instanceof AgentMailError);
    });

    test('a wrong API key is refused in AgentMail error shape', async () => {
      const stranger = new AgentMailClient({ apiKey: 'wrong', baseUrl, maxRetries: 0 });
      await assert.rejects(
        stranger.inboxes.list(),
        (error: unknown) =>
          error instanceof AgentMailError &&
          error.statusCode === 401 &&
          (error.body as { name?: string }).name === 'UnauthorizedError',
      );
    });
  });

  describe('attachments', () => {
    test('a message lists its attachments (metadata, never bytes) as AgentMail does; the SDK fetches a signed URL that serves the bytes until it expires', async () => {
      const pdf = Buffer.from('%PDF-1.4 not really a pdf');
      const { message } = await control.inbound({
        inbox_id: INBOX,
        from: CUSTOMER,
        subject: 'Invoice',
        text: 'The invoice is attached.',
        deliver: false,
        attachments: [
          { filename: 'invoice.pdf', content_type: 'application/pdf', content: pdf.toString('base64') },
          { filename: 'notes.txt', content_type: 'text/plain', text: 'line\n', repeat: 3 },
          {
            filename: 'logo.png',
            content_type: 'image/png',
            content_disposition: 'inline',
            content_id: 'logo',
            text: 'x',
          },
        ],
      });

      const read = await client.inboxes.messages.get(INBOX, message.message_id);
      assert.deepEqual(
        read.attachments?.map((a) => [a.filename, a.contentType, a.size, a.contentDisposition ?? null]),
        [
          ['invoice.pdf', 'application/pdf', pdf.length, null],
          ['notes.txt', 'text/plain', 15, null],
          ['logo.png', 'image/png', 1, 'inline'],
        ],
      );
      assert.ok(read.attachments?.every((a) => a.attachmentId.length > 0));
      assert.equal(JSON.stringify(read).includes(pdf.toString('base64')), false, 'no bytes in the message');
      const listed = await client.inboxes.messages.list(INBOX);
      assert.equal(listed.messages[0]?.attachments?.length, 3, 'the list shape carries them too');
      const thread = await client.inboxes.threads.get(INBOX, read.threadId);
      assert.equal(thread.attachments?.length, 3);

      const [invoice, notes] = read.attachments ?? [];
      const signed = await client.inboxes.messages.getAttachment(INBOX, message.message_id, invoice!.attachmentId);
      assert.equal(signed.filename, 'invoice.pdf');
      assert.ok(signed.expiresAt.getTime() > Date.now() + 59 * 60_000, 'valid for an hour');
      const download = await fetch(signed.downloadUrl); // no API key: a CDN URL
      assert.equal(download.status, 200);
      assert.equal(download.headers.get('content-type'), 'application/pdf');
      assert.deepEqual(Buffer.from(await download.arrayBuffer()), pdf);
      const text = await client.inboxes.messages.getAttachment(INBOX, message.message_id, notes!.attachmentId);
      assert.equal(await (await fetch(text.downloadUrl)).text(), 'line\nline\nline\n');

      // Another message's attachment id, or an unknown one: 404 as AgentMail answers.
      const other = await arrive();
      await assert.rejects(
        client.inboxes.messages.getAttachment(INBOX, other.message_id, invoice!.attachmentId),
        AgentMail.NotFoundError,
      );
      // An hour later the signed URL is refused, as a CDN refuses an expired signature; a fresh one works.
      await control.advanceClock(60 * 60_000 + 1);
      assert.equal((await fetch(signed.downloadUrl)).status, 403);
      const fresh = await client.inboxes.messages.getAttachment(INBOX, message.message_id, invoice!.attachmentId);
      assert.equal((await fetch(fresh.downloadUrl)).status, 200);
    });

    test('an attachment given as content and text at once, or as bad base64, is refused (400)', async () => {
      for (const attachment of [{ content: 'aGk=', text: 'hi' }, { content: '***' }]) {
        const response = await fetch(`${baseUrl}/_sandbox/inbound`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inbox_id: INBOX, from: CUSTOMER, deliver: false, attachments: [attachment] }),
        });
        assert.equal(response.status, 400);
      }
      assert.equal((await control.state()).messages, 0, 'nothing stored');
    });
  });

  describe('Idempotency-Key on reply', () => {
    test('the same key twice sends one email and returns the same ids', async () => {
      const inbound = await arrive();

      const a = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-1',
      });
      const b = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-1',
      });

      assert.deepEqual(b, a);
      const outbox = await control.outbox({ in_reply_to: inbound.message_id });
      assert.equal(outbox.length, 1);
      const sent = await client.inboxes.messages.get(INBOX, a.messageId);
      assert.equal(sent.threadId, inbound.thread_id);
      assert.equal(sent.inReplyTo, inbound.message_id);
      assert.deepEqual(sent.references, [inbound.message_id]);
      assert.equal(sent.from, INBOX);
      assert.deepEqual(sent.to, [CUSTOMER]);
      assert.equal(sent.subject, 'Re: Where is my order?');
      assert.deepEqual(sent.labels, ['sent']);
      assert.deepEqual(sent.headers, { 'Auto-Submitted': 'auto-replied' });
    });

    test('without a key every request sends', async () => {
      const inbound = await arrive();
      await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody());
      await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody());
      assert.equal((await control.outbox()).length, 2);
    });

    test('the same key with a different body is a 409 ConflictError, and nothing more is sent', async () => {
      const inbound = await arrive();
      await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody('first text'), {
        idempotencyKey: 'reply-2',
      });

      await assert.rejects(
        client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody('edited text'), {
          idempotencyKey: 'reply-2',
        }),
        (error: unknown) =>
          error instanceof AgentMail.ConflictError &&
          error.statusCode === 409 &&
          /different request/.test((error.body as { message: string }).message),
      );
      const other = await arrive({ subject: 'other' });
      await assert.rejects(
        client.inboxes.messages.reply(INBOX, other.message_id, replyBody('first text'), { idempotencyKey: 'reply-2' }),
        AgentMail.ConflictError,
      );
      assert.equal((await control.outbox()).length, 1);
    });

    test('a request while the first with its key is in flight gets 409 "in progress"', async () => {
      const inbound = await arrive();
      await control.setFaults({ match: { method: 'POST', path: /\/reply$/, count: 1 }, action: 'delay', ms: 400 });

      const first = client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-3',
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await assert.rejects(
        client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), { idempotencyKey: 'reply-3' }),
        (error: unknown) =>
          error instanceof AgentMail.ConflictError && /in progress/.test((error.body as { message: string }).message),
      );
      const sent = await first;
      const again = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-3',
      });

      assert.equal(again.messageId, sent.messageId);
      assert.equal((await control.outbox()).length, 1);
    });

    test('an empty, overlong or non-ASCII key is a 400 and sends nothing', async () => {
      const inbound = await arrive();
      for (const key of ['', 'k'.repeat(257), 'clé-1']) {
        await assert.rejects(
          client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), { idempotencyKey: key }),
          AgentMail.ValidationError,
          `key ${JSON.stringify(key.slice(0, 10))}`,
        );
      }
      await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), { idempotencyKey: 'k'.repeat(256) });
      assert.equal((await control.outbox()).length, 1);
    });

    test('a key expires 24 h after the send completes: then the same request sends again', async () => {
      const inbound = await arrive();
      const a = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-4',
      });

      await control.advanceClock(24 * 3600_000 - 60_000);
      const b = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-4',
      });
      assert.equal(b.messageId, a.messageId, 'a minute before expiry the key still replays');

      await control.advanceClock(60_000);
      const c = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-4',
      });
      assert.notEqual(c.messageId, a.messageId);
      assert.equal((await control.outbox()).length, 2);
    });

    test('drop-after-commit: the client errors, the email is out, and a retry with the key returns it', async () => {
      const inbound = await arrive();
      await control.setFaults({ match: { method: 'POST', path: '/reply', count: 1 }, action: 'drop-after-commit' });

      // A short timeout: the SDK leaves its timeout timer running when the connection resets.
      await assert.rejects(
        client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
          idempotencyKey: 'reply-5',
          timeoutInSeconds: 1,
        }),
        (error: unknown) => error instanceof AgentMailError && error.statusCode === undefined,
      );
      const outbox = await control.outbox();
      assert.equal(outbox.length, 1);
      assert.equal(outbox[0]?.idempotency_key, 'reply-5');

      const retried = await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
        idempotencyKey: 'reply-5',
      });
      assert.equal(retried.messageId, outbox[0]?.message.message_id);
      assert.equal((await control.outbox()).length, 1);
    });

    test('a status fault answers without sending; drop-before-commit sends nothing either', async () => {
      const inbound = await arrive();
      await control.setFaults([
        { match: { path: '/reply', count: 1 }, action: 'status', status: 503 },
        { match: { path: '/reply', count: 1 }, action: 'drop-before-commit' },
      ]);
      await assert.rejects(
        client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), { idempotencyKey: 'reply-6' }),
        (e: unknown) => e instanceof AgentMailError && e.statusCode === 503,
      );
      await assert.rejects(
        client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), {
          idempotencyKey: 'reply-6',
          timeoutInSeconds: 1,
        }),
        AgentMailError,
      );
      assert.equal((await control.outbox()).length, 0);
      await client.inboxes.messages.reply(INBOX, inbound.message_id, replyBody(), { idempotencyKey: 'reply-6' });
      assert.equal((await control.outbox()).length, 1);
    });
  });

  describe('labels and drafts', () => {
    test('messages.update adds and removes labels', async () => {
      const inbound = await arrive();

      const updated = await client.inboxes.messages.update(INBOX, inbound.message_id, {
        addLabels: ['replied'],
        removeLabels: ['unread'],
      });

      assert.deepEqual(updated.labels, ['received', 'replied']);
      assert.deepEqual((await client.inboxes.messages.get(INBOX, inbound.message_id)).labels, ['received', 'replied']);
    });

    test('a draft client_id returns the original draft; sending it is idempotent and deletes it', async () => {
      const inbound = await arrive();
      const request = {
        to: [CUSTOMER],
        subject: 'Re: Where is my order?',
        text: 'It ships today.',
        inReplyTo: inbound.message_id,
        clientId: 'draft-for-42',
      };

      const a = await client.inboxes.drafts.create(INBOX, request);
      const b = await client.inboxes.drafts.create(INBOX, request);
      assert.equal(b.draftId, a.draftId);
      assert.equal((await client.inboxes.drafts.list(INBOX)).count, 1);
      assert.equal((await client.inboxes.drafts.get(INBOX, a.draftId)).clientId, 'draft-for-42');

      const sent = await client.inboxes.drafts.send(INBOX, a.draftId, {}, { idempotencyKey: 'send-draft-42' });
      const again = await client.inboxes.drafts.send(INBOX, a.draftId, {}, { idempotencyKey: 'send-draft-42' });
      assert.deepEqual(again, sent);
      assert.equal(sent.threadId, inbound.thread_id);
      assert.equal((await control.outbox()).length, 1);
      await assert.rejects(client.inboxes.drafts.get(INBOX, a.draftId), AgentMail.NotFoundError);
    });
  });

  describe('webhooks', () => {
    test('message.received is Svix-signed over the exact body and verifies with the secret', async () => {
      const { event_id, message } = await control.inbound({
        inbox_id: INBOX,
        from: CUSTOMER,
        subject: 'Hello',
        text: 'Hi there',
      });

      await control.waitForDeliveries((attempts) => attempts.some((a) => a.ok), { eventId: event_id });
      const [delivery] = receiver.requests;
      assert.ok(delivery);
      const headers = {
        'svix-id': String(delivery.headers['svix-id']),
        'svix-timestamp': String(delivery.headers['svix-timestamp']),
        'svix-signature': String(delivery.headers['svix-signature']),
      };
      new Webhook(SECRET).verify(delivery.body, headers); // throws unless signed over these bytes
      const payload = JSON.parse(delivery.body) as {
        type: string;
        event_type: string;
        event_id: string;
        message: { message_id: string };
        thread: { thread_id: string };
      };

      assert.equal(payload.type, 'event');
      assert.equal(payload.event_type, 'message.received');
      assert.equal(payload.event_id, event_id);
      assert.equal(payload.message.message_id, message.message_id);
      assert.equal(payload.thread.thread_id, message.thread_id);
      assert.throws(() => new Webhook(SECRET).verify(delivery.body.replace('Hello', 'Hellp'), headers));
    });

    test('a 500 from the receiver is retried with the same svix-id until a 2xx', async () => {
      receiver.statuses.push(500, 500);
      const { event_id, svix_id } = await control.inbound({ inbox_id: INBOX, from: CUSTOMER, subject: 'Retry me' });

      const attempts = await control.waitForDeliveries((list) => list.some((a) => a.ok), { eventId: event_id });

      assert.deepEqual(
        attempts.map((a) => a.status),
        [500, 500, 200],
      );
      assert.ok(attempts.every((a) => a.svix_id === svix_id));
      assert.deepEqual(new Set(receiver.requests.map((r) => r.headers['svix-id'])), new Set([svix_id]));
      assert.equal((await control.events()).find((e) => e.event_id === event_id)?.status, 'delivered');
    });

    test('duplicates, redelivery and resend-as-new: the same event id vs a new one', async () => {
      const { event_id, svix_id } = await control.inbound({
        inbox_id: INBOX,
        from: CUSTOMER,
        subject: 'Twice',
        duplicates: 1,
      });
      await control.waitForDeliveries((list) => list.filter((a) => a.ok).length === 2, { eventId: event_id });

      const redelivered = await control.redeliver(event_id);
      const renewed = await control.resendAsNew(event_id);
      await control.waitForDeliveries((list) => list.some((a) => a.ok), { eventId: renewed.event_id });

      assert.equal(redelivered.svix_id, svix_id);
      assert.notEqual(renewed.svix_id, svix_id);
      const eventIds = receiver.requests.map((r) => (JSON.parse(r.body) as { event_id: string }).event_id);
      assert.deepEqual(eventIds, [event_id, event_id, event_id, renewed.event_id]);
    });

    test('a disabled endpoint receives nothing and the webhooks API reports enabled: false', async () => {
      await control.setWebhook({ enabled: false });
      const { event_id } = await control.inbound({ inbox_id: INBOX, from: CUSTOMER, subject: 'Lost' });
      await new Promise((resolve) => setTimeout(resolve, 100));

      const { webhooks } = await client.webhooks.list();
      assert.equal(webhooks[0]?.enabled, false);
      assert.equal(receiver.requests.length, 0);
      assert.equal((await control.events()).find((e) => e.event_id === event_id)?.status, 'skipped');
    });
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AgentMail } from 'agentmail';
import { recipientOf, replyRecipient } from '../activities/agentmail/recipients';
import { isRobotSender, skipReason } from '../activities/decide/reply-policy';
import { loadWorkerConfig, parseDuration } from '../lib/config';

// The pure rules of issue 13: whom a reply goes to, and which messages look automatic.

const DAY = 24 * 60 * 60 * 1000;
const NOW = Date.parse('2026-12-01T08:00:00Z');

function message(fields: Partial<AgentMail.Message> = {}): AgentMail.Message {
  return {
    inboxId: 'support@ours.example',
    threadId: 't1',
    messageId: '<m1@customer.example>',
    labels: ['received', 'unread'],
    timestamp: new Date(NOW - 60_000),
    from: 'Ada Lovelace <ada@customer.example>',
    to: ['support@ours.example'],
    size: 1,
    updatedAt: new Date(NOW),
    createdAt: new Date(NOW),
    ...fields,
  };
}

const NO_VOUCHED = { replyToDomains: [] };
const VOUCHED = { replyToDomains: ['customer.example'] };
const to = (fields: Partial<AgentMail.Message>) => replyRecipient(message(fields), NO_VOUCHED)?.address ?? null;

describe('whom a reply goes to', () => {
  test('the sender, as a bare address (the display name stays behind)', () => {
    assert.equal(to({}), 'ada@customer.example');
    assert.equal(to({ from: '"Lovelace, Ada" <ada@customer.example>' }), 'ada@customer.example');
  });

  test('a single Reply-To to the sender’s own mailbox (+tag, case) is honoured; another mailbox of the domain only when vouched for', () => {
    assert.equal(to({ replyTo: ['Ada <Ada+orders@Customer.EXAMPLE>'] }), 'Ada+orders@Customer.EXAMPLE');
    assert.equal(to({ replyTo: ['Billing <billing@Customer.EXAMPLE>'] }), 'ada@customer.example');
    assert.equal(replyRecipient(message({ replyTo: ['billing@customer.example'] }), VOUCHED)?.source, 'reply-to');
    const gmail = { from: 'a@gmail.com', replyTo: ['victim@gmail.com'] };
    assert.equal(to(gmail), 'a@gmail.com', 'a public mail domain is not one person');
  });

  test('Reply-To is ignored — the sender gets the reply — when it names another domain, several addresses or a group', () => {
    assert.equal(to({ replyTo: ['victim@elsewhere.example'] }), 'ada@customer.example');
    assert.equal(to({ replyTo: ['a@customer.example', 'b@customer.example'] }), 'ada@customer.example');
    assert.equal(to({ replyTo: ['a@customer.example, b@customer.example'] }), 'ada@customer.example');
    assert.equal(to({ replyTo: ['Team: a@customer.example;'] }), 'ada@customer.example');
    assert.equal(to({ replyTo: ['not an address'] }), 'ada@customer.example');
    const fifty = Array.from({ length: 50 }, (_, i) => `person${i}@customer.example`);
    assert.equal(to({ replyTo: fifty }), 'ada@customer.example');
  });

  test('no valid recipient when From is not exactly one address', () => {
    assert.equal(to({ from: 'a@customer.example, b@customer.example' }), null);
    assert.equal(to({ from: 'MAILER-DAEMON' }), null);
    assert.equal(to({ from: 'Team: a@customer.example, b@customer.example;' }), null);
    assert.equal(to({ from: '' }), null);
  });

  test('a display name holding addresses is a name, not recipients', () => {
    assert.equal(to({ from: '"a@evil.example, b@evil.example" <ada@customer.example>' }), 'ada@customer.example');
  });

  test('an activity asking for the recipient of a message without one gets a final failure, not a guess', () => {
    const ref = { inboxId: 'support@ours.example', messageId: '<m1@customer.example>' };
    assert.throws(() => recipientOf(message({ from: 'nobody' }), ref, NO_VOUCHED), { type: 'NoValidRecipient' });
    assert.throws(() => recipientOf(message({ from: 'support@OURS.example' }), ref, NO_VOUCHED), {
      type: 'NoValidRecipient',
    });
    assert.equal(recipientOf(message(), ref, NO_VOUCHED), 'ada@customer.example');
  });
});

describe('which messages look automatic', () => {
  const reason = (fields: Partial<AgentMail.Message>) => skipReason(message(fields), { now: NOW, maxAgeMs: 7 * DAY });

  test('a customer’s ordinary message, and a quick follow-up to our answer, are not robots', () => {
    assert.equal(reason({}), null);
    assert.equal(
      reason({ subject: 'Re: Your order', inReplyTo: '<our-reply@ours.example>', timestamp: new Date(NOW - 5_000) }),
      null,
    );
  });

  const robots: Array<[Record<string, string>, string]> = [
    [{ 'X-Autoreply': 'yes' }, 'auto-responder'],
    [{ 'x-autorespond': 'Out of office' }, 'auto-responder'],
    [{ Precedence: 'auto_reply' }, 'auto-responder'],
    [{ 'X-Auto-Response-Suppress': 'All' }, 'auto-response-suppressed'],
    [{ 'X-Auto-Response-Suppress': 'OOF' }, 'auto-response-suppressed'],
    [{ 'X-Auto-Response-Suppress': 'DR, AutoReply' }, 'auto-response-suppressed'],
    [{ 'Return-Path': '<>' }, 'bounce'],
    [{ 'Return-Path': ' < > ' }, 'bounce'],
    [{ 'Auto-Submitted': 'auto-replied' }, 'auto-submitted'],
    [{ Precedence: 'bulk' }, 'bulk-precedence'],
    [{ 'List-Id': '<news.customer.example>' }, 'mailing-list'],
  ];
  for (const [headers, expected] of robots) {
    test(`${JSON.stringify(headers)} → ${expected}`, () => assert.equal(reason({ headers }), expected));
  }

  // Issue 18 point 6: one table of robot senders, with their spellings, +tags and cases.
  const robotSenders = [
    'noreply@shop.example',
    'no-reply@shop.example',
    'no_reply@shop.example',
    'no.reply@shop.example',
    'No-Reply+orders@Shop.EXAMPLE',
    'NOREPLY@shop.example',
    'donotreply@bank.example',
    'do-not-reply@bank.example',
    'do_not_reply@bank.example',
    'Do.Not.Reply@bank.example',
    'DoNotReply+statements@bank.example',
    'bounces@lists.example',
    'bounces+abc123@lists.example',
    'bounces-7f3a=customer.example@lists.example',
    'bounce@mail.example',
    'notifications@github.example',
    'Notifications+repo@GitHub.example',
    'notification@app.example',
    'notify@app.example',
    'MAILER-DAEMON@mx.customer.example',
    'mailer_daemon@mx.customer.example',
    'postmaster@customer.example',
    '"Shop" <no.reply@shop.example>',
    'auto-reply@desk.example',
  ];
  for (const from of robotSenders) {
    test(`${from} is a robot sender`, () => {
      assert.equal(isRobotSender(from), true);
      assert.equal(reason({ from }), 'robot-sender');
    });
  }
  const people = [
    'ada@customer.example',
    'nora.reply@customer.example',
    'noreen@customer.example',
    'donna@customer.example',
    'notifier.team.lead@customer.example',
    'bouncer@club.example',
    'reply@customer.example',
    'support@customer.example',
    'Noreply Fan <ada@customer.example>',
  ];
  for (const from of people) {
    test(`${from} is not a robot sender`, () => {
      assert.equal(isRobotSender(from), false);
      assert.equal(reason({ from }), null);
    });
  }

  // An out-of-office reply without the headers (older servers, phone clients): its subject says it.
  const autoReplySubjects = [
    'Automatic reply: Your order has been dispatched',
    'Auto-Reply: Re: your return',
    'AutoReply: Re: your return',
    'Out of Office: Re: Your Fernhill order',
    'Out of the office reply: parcel',
    'Abwesenheitsnotiz: Ihre Bestellung',
    'Réponse automatique : votre commande',
    'Respuesta automática: su pedido',
    'Automatisch antwoord: uw bestelling',
    'Risposta automatica: il suo ordine',
    'Resposta automática: a sua encomenda',
  ];
  for (const subject of autoReplySubjects) {
    test(`subject "${subject}" → auto-responder`, () => assert.equal(reason({ subject }), 'auto-responder'));
  }
  test('a customer who mentions being out of office, or an automatic reply, is answered', () => {
    assert.equal(reason({ subject: 'out of office until Monday, can you hold my parcel?' }), null);
    assert.equal(reason({ subject: 'Re: automatic reply from your system?' }), null);
    assert.equal(reason({ subject: 'Your automatic reply: is it right?' }), null);
  });

  test('receipt-only suppression (DR, RN) and an ordinary Return-Path are not a robot’s marks', () => {
    assert.equal(reason({ headers: { 'X-Auto-Response-Suppress': 'DR, RN' } }), null);
    assert.equal(reason({ headers: { 'Return-Path': '<ada@customer.example>', 'Auto-Submitted': 'no' } }), null);
  });

  test('labelled replied at AgentMail → already-replied; older than the age limit → too-old', () => {
    assert.equal(reason({ labels: ['received', 'replied'] }), 'already-replied');
    assert.equal(reason({ timestamp: new Date(NOW - 7 * DAY - 1) }), 'too-old');
    assert.equal(reason({ timestamp: new Date(NOW - 7 * DAY + 60_000) }), null);
  });
});

test('REPLY_MAX_AGE accepts durations with a unit', () => {
  assert.equal(parseDuration('7d'), 7 * DAY);
  assert.equal(parseDuration('36h'), 36 * 60 * 60 * 1000);
  assert.equal(parseDuration('90m'), 90 * 60 * 1000);
  assert.equal(parseDuration('1.5h'), 90 * 60 * 1000);
  assert.equal(parseDuration('2w'), 14 * DAY);
  assert.equal(parseDuration('7'), null, 'a bare number is ambiguous');
  assert.equal(parseDuration('seven days'), null);
});

test('the worker reads REPLYONCE_INBOXES, REPLY_CEILING_PER_INBOX_PER_HOUR and REPLY_MAX_AGE, with defaults', () => {
  const env = { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/replyonce', AGENTMAIL_API_KEY: 'k' };
  const defaults = loadWorkerConfig(env);
  assert.deepEqual(
    [defaults.REPLYONCE_INBOXES, defaults.REPLY_CEILING_PER_INBOX_PER_HOUR, defaults.REPLY_MAX_AGE],
    [[], 200, 7 * DAY],
  );
  const set = loadWorkerConfig({
    ...env,
    REPLYONCE_INBOXES: 'Support@Example.com, sales@example.com',
    REPLY_CEILING_PER_INBOX_PER_HOUR: '50',
    REPLY_MAX_AGE: '36h',
  });
  assert.deepEqual(
    [set.REPLYONCE_INBOXES, set.REPLY_CEILING_PER_INBOX_PER_HOUR, set.REPLY_MAX_AGE],
    [['support@example.com', 'sales@example.com'], 50, 36 * 60 * 60 * 1000],
  );
  assert.throws(() => loadWorkerConfig({ ...env, REPLY_MAX_AGE: '7' }), /REPLY_MAX_AGE must be a duration with a unit/);
});

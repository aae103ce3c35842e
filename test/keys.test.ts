import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalJson, inboundWorkflowId, providerIdempotencyKey, requestHash, sha256Hex } from '../lib/hashing';
import { draftKey, keyPart, MAX_KEY_PART, operationKey, replyKey, ticketKey } from '../contract';

const ref = { inboxId: 'support@example.com', messageId: '<abc.123@mail.example.com>' };

test('operation keys name the inbox, the message, the effect and its version', () => {
  assert.equal(draftKey(ref), 'support@example.com/<abc.123@mail.example.com>/draft/v1');
  assert.equal(ticketKey(ref), 'support@example.com/<abc.123@mail.example.com>/ticket/v1');
  assert.equal(replyKey(ref), 'support@example.com/<abc.123@mail.example.com>/reply/v1');
  assert.equal(replyKey(ref, 2), 'support@example.com/<abc.123@mail.example.com>/reply/v2');
  assert.throws(() => operationKey(ref, 'reply', 0), RangeError);
});

test('the workflow id is stable per (inbox, message), differs across inboxes, and hides the raw ids', () => {
  const id = inboundWorkflowId(ref);
  assert.equal(id, inboundWorkflowId({ ...ref }));
  assert.match(id, /^inbound-message-[0-9a-f]{40}$/);
  assert.notEqual(id, inboundWorkflowId({ ...ref, inboxId: 'sales@example.com' }));
  assert.ok(!id.includes('example.com'));
  // The two parts cannot be shifted into each other.
  assert.notEqual(
    inboundWorkflowId({ inboxId: 'a/b', messageId: 'c' }),
    inboundWorkflowId({ inboxId: 'a', messageId: 'b/c' }),
  );
});

test('the provider idempotency key is derived from the operation key, prefixed, and fits AgentMail limits', () => {
  const key = providerIdempotencyKey(replyKey(ref));
  assert.equal(key, providerIdempotencyKey(replyKey(ref)));
  assert.notEqual(key, providerIdempotencyKey(replyKey(ref, 2)));
  assert.match(key, /^replyonce-[0-9a-f]{64}$/);
  assert.ok(key.length <= 256);
});

test('request hashes ignore key order but see every value', () => {
  assert.equal(canonicalJson({ b: 1, a: { d: 2, c: 3 } }), '{"a":{"c":3,"d":2},"b":1}');
  assert.equal(requestHash({ to: ['x'], text: 'hi' }), requestHash({ text: 'hi', to: ['x'] }));
  assert.notEqual(requestHash({ to: ['x'], text: 'hi' }), requestHash({ to: ['x'], text: 'hi!' }));
});

test('keys of any length: a long id keeps a readable prefix and its hash; short keys are unchanged', () => {
  // Prepare: the longest ids the ingress accepts (998 bytes of message id, 320 characters of inbox)
  const longMessage = `<${'m'.repeat(990)}@mail.example.com>`.slice(0, 998);
  const longInbox = `${'i'.repeat(300)}@example.com`.slice(0, 320);
  const wide = `<${'é'.repeat(400)}>`; // 2 bytes a character: 802 bytes

  // Act
  const keys = [
    replyKey({ inboxId: longInbox, messageId: longMessage }, 99),
    draftKey({ inboxId: ref.inboxId, messageId: wide }),
    operationKey({ inboxId: ref.inboxId, messageId: longMessage }, 'a'.repeat(50)),
  ];

  // Assess
  for (const key of keys) assert.ok([...key].length <= 1000, `${key.length} characters`);
  assert.equal(keyPart(longMessage), `${longMessage.slice(0, 64)}…#${sha256Hex(longMessage)}`);
  assert.equal(keyPart('m'.repeat(MAX_KEY_PART)), 'm'.repeat(MAX_KEY_PART), 'an id at the limit is kept');
  assert.notEqual(keyPart(`${longMessage}x`), keyPart(longMessage), 'ids sharing the prefix differ by their hash');
  assert.equal(keyPart(wide).slice(0, 64), wide.slice(0, 64), 'the prefix is cut at a code point');
  // A short id cannot pose as another id's hashed form.
  assert.notEqual(keyPart(keyPart(longMessage)), keyPart(longMessage));
});

test('the keys module hashes like node:crypto (it cannot use it: workflow code derives keys)', () => {
  const id = `<${'x'.repeat(500)}>`;
  assert.ok(keyPart(id).endsWith(`#${sha256Hex(id)}`));
});

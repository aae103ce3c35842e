// `npm run ids`: a message's workflow id and operation keys, as the ingress and the workflow derive them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { decisionKey, draftKey, replyKey, ticketKey } from '../contract';
import { inboundWorkflowId, providerIdempotencyKey } from '../lib/hashing';

const root = path.resolve(__dirname, '..');
const ids = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts', 'ids.ts'), ...args], {
    cwd: root,
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  });

test('prints the workflow id and every operation key of the message, with the send’s Idempotency-Key', () => {
  // Prepare: a long id is hashed in keys (keyPart), so the printout must come from the real functions
  const ref = { inboxId: 'support@example.com', messageId: `<${'m'.repeat(240)}@mail.example>` };

  // Act
  const text = ids('--inbox', ref.inboxId, '--message', ref.messageId);
  const json = ids('--inbox', ref.inboxId, '--message', ref.messageId, '--json');

  // Assess
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^workflow id\\s+${inboundWorkflowId(ref)}$`, 'm'));
  for (const key of [decisionKey(ref), ticketKey(ref), draftKey(ref), replyKey(ref), replyKey(ref, 2)]) {
    assert.ok(text.stdout.includes(key), key);
  }
  assert.ok(text.stdout.includes(providerIdempotencyKey(replyKey(ref))));
  assert.ok(text.stdout.includes(`npm run temporal -- workflow describe --workflow-id ${inboundWorkflowId(ref)}`));
  const parsed = JSON.parse(json.stdout) as { workflowId: string; operations: Array<{ kind: string; key: string }> };
  assert.equal(parsed.workflowId, inboundWorkflowId(ref));
  assert.equal(parsed.operations.find((o) => o.kind === 'reply v1')?.key, replyKey(ref));
  assert.equal(parsed.operations.length, 9);
});

test('without --inbox or --message it says what it needs and exits 1', () => {
  const result = ids('--inbox', 'support@example.com');
  assert.equal(result.status, 1);
  assert.match(
    result.stderr,
    /--inbox and --message are both needed\nusage: npm run ids -- --inbox <inbox id> --message <message id>/,
  );
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadApiConfig } from '../lib/config';

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

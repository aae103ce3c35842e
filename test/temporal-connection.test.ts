// Temporal's connection as every process reads it (lib/temporal-connection.ts over @temporalio/envconfig):
// what each variable and profile does, and that a mistake stops the process with the variable named.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadWorkerConfig } from '../lib/config';
import { loadTemporalConnection, type TemporalConnectionSettings } from '../lib/temporal-connection';
import { isTemporalCloud } from '../scripts/services/temporal-setup';

let dir: string;
let certs: (name: string) => string;
before(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'replyonce-tls-'));
  execFileSync('sh', [path.join(__dirname, '..', 'deploy', 'tls', 'generate-certs.sh'), dir]);
  certs = (name) => path.join(dir, name);
});
after(() => rmSync(dir, { recursive: true, force: true }));

function loaded(env: Record<string, string>): TemporalConnectionSettings {
  const result = loadTemporalConnection(env);
  assert.ok(result.ok, result.ok ? '' : result.problems.join('\n'));
  return result.settings;
}

function refused(env: Record<string, string>, ...expected: RegExp[]): void {
  const result = loadTemporalConnection(env);
  assert.equal(result.ok, false, `accepted ${JSON.stringify(env)}`);
  const text = result.ok ? '' : result.problems.join('\n');
  for (const pattern of expected) assert.match(text, pattern);
}

describe('the Temporal connection', () => {
  test('nothing set: the local dev server in plaintext, namespace replyonce', () => {
    const settings = loaded({});
    assert.equal(settings.address, 'localhost:7233');
    assert.equal(settings.namespace, 'replyonce');
    assert.equal(settings.security, 'plaintext');
    assert.equal(settings.connectionOptions.tls, undefined);
  });

  test('an API key turns TLS on by itself (Temporal Cloud)', () => {
    const settings = loaded({
      TEMPORAL_ADDRESS: 'eu-west-1.aws.api.temporal.io:7233',
      TEMPORAL_NAMESPACE: 'replyonce.a1b2c',
      TEMPORAL_API_KEY: 'secret-key',
    });
    assert.equal(settings.security, 'TLS + API key');
    assert.equal(settings.connectionOptions.tls, true);
    assert.equal(settings.connectionOptions.apiKey, 'secret-key');
    assert.ok(isTemporalCloud(settings.address));
    assert.ok(!isTemporalCloud('temporal.internal:7233'));
  });

  test('an API key over plaintext is refused, naming both variables', () => {
    refused({ TEMPORAL_API_KEY: 'secret-key', TEMPORAL_TLS: 'false' }, /TEMPORAL_API_KEY/, /TEMPORAL_TLS/, /plaintext/);
  });

  test('mTLS from files: the client pair and the server CA are loaded', () => {
    const settings = loaded({
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      TEMPORAL_TLS_CLIENT_CERT_PATH: certs('client.pem'),
      TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key'),
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: certs('ca.pem'),
      TEMPORAL_TLS_SERVER_NAME: 'temporal',
    });
    assert.equal(settings.security, 'mTLS');
    const tls = settings.connectionOptions.tls;
    assert.ok(typeof tls === 'object' && tls.clientCertPair);
    assert.deepEqual(Buffer.from(tls.clientCertPair.crt), readFileSync(certs('client.pem')));
    assert.deepEqual(Buffer.from(tls.serverRootCACertificate ?? []), readFileSync(certs('ca.pem')));
    assert.equal(tls.serverNameOverride, 'temporal');
  });

  test('mTLS from data (secrets injected as variables)', () => {
    const settings = loaded({
      TEMPORAL_TLS_CLIENT_CERT_DATA: readFileSync(certs('client.pem'), 'utf8'),
      TEMPORAL_TLS_CLIENT_KEY_DATA: readFileSync(certs('client.key'), 'utf8'),
    });
    assert.equal(settings.security, 'mTLS');
  });

  test('a certificate path that does not exist is named with its variable', () => {
    refused(
      { TEMPORAL_TLS_CLIENT_CERT_PATH: '/nowhere/client.pem', TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key') },
      /TEMPORAL_TLS_CLIENT_CERT_PATH names \/nowhere\/client.pem, which does not exist/,
    );
    refused(
      { TEMPORAL_TLS_SERVER_CA_CERT_PATH: dir },
      /TEMPORAL_TLS_SERVER_CA_CERT_PATH names .*, which is not a file/,
    );
  });

  test('a path and the data for the same certificate are refused, naming both variables', () => {
    refused(
      {
        TEMPORAL_TLS_CLIENT_CERT_PATH: certs('client.pem'),
        TEMPORAL_TLS_CLIENT_CERT_DATA: readFileSync(certs('client.pem'), 'utf8'),
        TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key'),
      },
      /TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_CERT_DATA .* are both set/,
    );
  });

  test('a key without a certificate, or a certificate without its key, is refused', () => {
    refused({ TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key') }, /client key is set .* without a client certificate/);
    refused({ TEMPORAL_TLS_CLIENT_CERT_PATH: certs('client.pem') }, /client certificate is set .* without its key/);
  });

  test('a key that does not belong to the certificate, or a file that is not PEM, is refused', () => {
    refused(
      { TEMPORAL_TLS_CLIENT_CERT_PATH: certs('client.pem'), TEMPORAL_TLS_CLIENT_KEY_PATH: certs('ui.key') },
      /does not belong to the client certificate/,
    );
    const junk = path.join(dir, 'junk.pem');
    writeFileSync(junk, 'not a certificate');
    refused(
      { TEMPORAL_TLS_CLIENT_CERT_PATH: junk, TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key') },
      /client certificate .* is not a PEM certificate/,
    );
  });

  test('a client certificate with TLS turned off is refused rather than silently ignored', () => {
    refused(
      {
        TEMPORAL_TLS: 'false',
        TEMPORAL_TLS_CLIENT_CERT_PATH: certs('client.pem'),
        TEMPORAL_TLS_CLIENT_KEY_PATH: certs('client.key'),
      },
      /TEMPORAL_TLS_CLIENT_CERT_PATH is set but TEMPORAL_TLS turns TLS off/,
    );
  });

  test('an address that is not host:port names TEMPORAL_ADDRESS', () => {
    refused({ TEMPORAL_ADDRESS: 'http://localhost:7233' }, /TEMPORAL_ADDRESS must be host:port/);
  });

  describe('a TOML profile file', () => {
    let file: string;
    before(() => {
      file = path.join(dir, 'temporal.toml');
      writeFileSync(
        file,
        [
          '[profile.default]',
          'address = "localhost:7233"',
          '',
          '[profile.cluster]',
          'address = "temporal.internal:7233"',
          'namespace = "replyonce-prod"',
          '[profile.cluster.tls]',
          `client_cert_path = "${certs('client.pem')}"`,
          `client_key_path = "${certs('client.key')}"`,
          `server_ca_cert_path = "${certs('ca.pem')}"`,
          '',
          '[profile.broken]',
          'address = "temporal.internal:7233"',
          '[profile.broken.tls]',
          'client_cert_path = "/nowhere/cert.pem"',
          `client_key_path = "${certs('client.key')}"`,
        ].join('\n'),
      );
    });

    test('TEMPORAL_PROFILE picks a profile; variables override its fields', () => {
      const settings = loaded({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'cluster' });
      assert.equal(settings.address, 'temporal.internal:7233');
      assert.equal(settings.namespace, 'replyonce-prod');
      assert.equal(settings.security, 'mTLS');
      assert.equal(settings.profile, 'cluster');
      const overridden = loaded({
        TEMPORAL_CONFIG_FILE: file,
        TEMPORAL_PROFILE: 'cluster',
        TEMPORAL_NAMESPACE: 'other',
      });
      assert.equal(overridden.namespace, 'other');
    });

    test("a profile's problem names the profile key and the file", () => {
      refused(
        { TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'broken' },
        /profile\.broken\.tls\.client_cert_path \(in .*temporal\.toml\) names \/nowhere\/cert\.pem, which does not exist/,
      );
    });

    test('an unknown profile names TEMPORAL_PROFILE; a missing file names TEMPORAL_CONFIG_FILE', () => {
      refused({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'nope' }, /TEMPORAL_PROFILE: .*nope/);
      refused({ TEMPORAL_CONFIG_FILE: path.join(dir, 'absent.toml') }, /TEMPORAL_CONFIG_FILE names .*absent\.toml/);
    });

    test('an unknown key in the file is refused (a typo would otherwise drop a setting)', () => {
      const typo = path.join(dir, 'typo.toml');
      writeFileSync(typo, '[profile.default]\naddres = "x:1"\n');
      refused({ TEMPORAL_CONFIG_FILE: typo }, /profile file .*typo\.toml.*addres/);
    });
  });

  test("the worker's start-up lists the connection's problems with the others, at once", () => {
    assert.throws(
      () => loadWorkerConfig({ TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false', AGENTMAIL_API_KEY: 'am' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /TEMPORAL_API_KEY is set but TEMPORAL_TLS/.test(error.message) &&
        /DATABASE_URL/.test(error.message),
    );
  });
});

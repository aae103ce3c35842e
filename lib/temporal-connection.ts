import { createPrivateKey, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { Connection } from '@temporalio/client';
import type { TLSConfig } from '@temporalio/common/lib/internal-non-workflow';
import {
  loadClientConfigProfile,
  toClientOptions,
  type ClientConfigProfile,
  type ConfigDataSource,
} from '@temporalio/envconfig';
import type { NativeConnection } from '@temporalio/worker';

/**
 * How every replyonce process reaches Temporal: Temporal's own environment configuration
 * (`@temporalio/envconfig`, the variables and TOML profiles the `temporal` CLI and every SDK read),
 * so a dev server, a self-hosted cluster with mTLS and Temporal Cloud (API key or mTLS) need no code.
 * This module loads it once at start-up, checks it with messages that name the variable to fix,
 * and opens the client's and the worker's connections from it.
 */

export const DEFAULT_TEMPORAL_ADDRESS = 'localhost:7233';
export const DEFAULT_TEMPORAL_NAMESPACE = 'replyonce';

export interface TemporalConnectionOptions {
  address: string;
  tls?: TLSConfig | boolean | undefined;
  apiKey?: string | undefined;
  metadata?: Record<string, string> | undefined;
}

export interface TemporalConnectionSettings {
  address: string;
  namespace: string;
  /** What `Connection.connect`/`lazy` and `NativeConnection.connect` take. */
  connectionOptions: TemporalConnectionOptions;
  /** `plaintext`, `TLS`, `mTLS` or `TLS + API key`: for logs and errors (never the key or a certificate). */
  security: string;
  /** The TOML profile in use, when a file supplied one. */
  profile?: string | undefined;
}

export type TemporalConnectionResult =
  { ok: true; settings: TemporalConnectionSettings } | { ok: false; problems: string[] };

type Env = Record<string, string | undefined>;

/** Each TLS source: its env variables and TOML keys, so a problem names what the operator set. */
const SOURCES = {
  clientCert: { env: 'TEMPORAL_TLS_CLIENT_CERT', toml: 'client_cert', what: 'client certificate' },
  clientKey: { env: 'TEMPORAL_TLS_CLIENT_KEY', toml: 'client_key', what: 'client private key' },
  serverCACert: { env: 'TEMPORAL_TLS_SERVER_CA_CERT', toml: 'server_ca_cert', what: 'server CA certificate' },
} as const;

/**
 * Reads the connection from `env` (empty values count as unset) and the TOML profile file
 * (`TEMPORAL_CONFIG_FILE`, else ~/.config/temporalio/temporal.toml; `TEMPORAL_PROFILE` picks the profile).
 * Returns every problem at once, each naming the variable or profile key behind it.
 */
export function loadTemporalConnection(rawEnv: Env = process.env): TemporalConnectionResult {
  const env = Object.fromEntries(
    Object.entries(rawEnv).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''),
  );
  const profileName = env.TEMPORAL_PROFILE;
  const file = env.TEMPORAL_CONFIG_FILE ?? '~/.config/temporalio/temporal.toml';
  const where = (tomlKey: string) => `profile.${profileName ?? 'default'}.${tomlKey} (in ${file})`;
  const origin = (envName: string, tomlKey: string) => (env[envName] !== undefined ? envName : where(tomlKey));

  if (env.TEMPORAL_CONFIG_FILE !== undefined && !existsSync(env.TEMPORAL_CONFIG_FILE)) {
    return { ok: false, problems: [`TEMPORAL_CONFIG_FILE names ${env.TEMPORAL_CONFIG_FILE}, which does not exist`] };
  }
  let profile: ClientConfigProfile;
  try {
    profile = loadClientConfigProfile({ overrideEnvVars: env, configFileStrict: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const both = /Cannot specify both (\w+)_path and \w+_data/.exec(message)?.[1];
    if (both !== undefined) {
      const envName = `TEMPORAL_TLS_${both.toUpperCase()}`;
      return {
        ok: false,
        problems: [
          `${envName}_PATH and ${envName}_DATA (or tls.${both}_path and _data in ${file}) are both set: keep one`,
        ],
      };
    }
    const culprit = /Profile '.*' not found/.test(message) ? 'TEMPORAL_PROFILE' : `the Temporal profile file ${file}`;
    return { ok: false, problems: [`${culprit}: ${message}`] };
  }

  const problems: string[] = [];
  const address = profile.address ?? DEFAULT_TEMPORAL_ADDRESS;
  if (!/^[^\s:/]+:\d{1,5}$/.test(address)) {
    problems.push(`${origin('TEMPORAL_ADDRESS', 'address')} must be host:port, e.g. localhost:7233 (got ${address})`);
  }
  const namespace = profile.namespace ?? DEFAULT_TEMPORAL_NAMESPACE;

  const tls = profile.tls;
  const tlsOff = tls?.disabled === true;
  const tlsOrigin = origin('TEMPORAL_TLS', 'tls.disabled');
  if (profile.apiKey !== undefined && tlsOff) {
    problems.push(
      `${origin('TEMPORAL_API_KEY', 'api_key')} is set but ${tlsOrigin} turns TLS off: an API key is never sent in plaintext (unset TEMPORAL_TLS, or set it to true)`,
    );
  }
  const pem: Partial<Record<keyof typeof SOURCES, Buffer>> = {};
  for (const [name, source] of Object.entries(SOURCES) as Array<
    [keyof typeof SOURCES, (typeof SOURCES)[keyof typeof SOURCES]]
  >) {
    const data = tls?.[name];
    if (data === undefined) continue;
    const label = dataOrigin(data, source, env, where);
    if (tlsOff) {
      problems.push(`${label} is set but ${tlsOrigin} turns TLS off, so it would be ignored; remove one of them`);
      continue;
    }
    const read = readSource(data, label, source.what);
    if (typeof read === 'string') problems.push(read);
    else pem[name] = read;
  }
  const certLabel = `${SOURCES.clientCert.env}_PATH or _DATA`;
  const keyLabel = `${SOURCES.clientKey.env}_PATH or _DATA`;
  if (tls?.clientKey !== undefined && tls.clientCert === undefined) {
    problems.push(`a client key is set (${keyLabel}) without a client certificate: set ${certLabel} too`);
  }
  if (tls?.clientCert !== undefined && tls.clientKey === undefined) {
    problems.push(`a client certificate is set (${certLabel}) without its key: set ${keyLabel} too`);
  }
  problems.push(...pemProblems(pem));
  if (problems.length > 0) return { ok: false, problems };

  const { connectionOptions } = toClientOptions(profile);
  const security = !connectionOptions.tls
    ? 'plaintext'
    : profile.apiKey !== undefined
      ? 'TLS + API key'
      : typeof connectionOptions.tls === 'object' && connectionOptions.tls.clientCertPair
        ? 'mTLS'
        : 'TLS';
  return {
    ok: true,
    settings: {
      address,
      namespace,
      connectionOptions: {
        address,
        tls: connectionOptions.tls ?? undefined,
        apiKey: connectionOptions.apiKey,
        metadata: profile.grpcMeta,
      },
      security,
      profile: profileName,
    },
  };
}

function dataOrigin(
  data: ConfigDataSource,
  source: (typeof SOURCES)[keyof typeof SOURCES],
  env: Env,
  where: (tomlKey: string) => string,
): string {
  const suffix = 'path' in data ? 'PATH' : 'DATA';
  const envName = `${source.env}_${suffix}`;
  return env[envName] !== undefined ? envName : where(`tls.${source.toml}_${suffix.toLowerCase()}`);
}

/** The PEM bytes, or a sentence saying what is wrong with the source. */
function readSource(data: ConfigDataSource, label: string, what: string): Buffer | string {
  if ('data' in data) return Buffer.from(data.data);
  if (!existsSync(data.path)) return `${label} names ${data.path}, which does not exist (the ${what})`;
  if (!statSync(data.path).isFile()) return `${label} names ${data.path}, which is not a file (the ${what})`;
  try {
    // envconfig reads the file again when it builds the connection options; reading it here first
    // turns a permission problem into a sentence instead of an EACCES stack trace.
    return readFileSync(data.path);
  } catch (error) {
    return `${label} names ${data.path}, which cannot be read: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** The certificates parse as X.509, the key as a private key, and the key belongs to the certificate. */
function pemProblems(pem: Partial<Record<keyof typeof SOURCES, Buffer>>): string[] {
  const problems: string[] = [];
  const certs: Partial<Record<'clientCert' | 'serverCACert', X509Certificate>> = {};
  for (const name of ['clientCert', 'serverCACert'] as const) {
    const bytes = pem[name];
    if (!bytes) continue;
    try {
      certs[name] = new X509Certificate(bytes);
    } catch {
      problems.push(`the ${SOURCES[name].what} (${SOURCES[name].env}_PATH or _DATA) is not a PEM certificate`);
    }
  }
  if (pem.clientKey) {
    try {
      const key = createPrivateKey(pem.clientKey);
      if (certs.clientCert && !certs.clientCert.checkPrivateKey(key)) {
        problems.push(
          `the client private key (${SOURCES.clientKey.env}_PATH or _DATA) does not belong to the client certificate`,
        );
      }
    } catch {
      problems.push(`the client private key (${SOURCES.clientKey.env}_PATH or _DATA) is not a PEM private key`);
    }
  }
  return problems;
}

/** One line for logs and error messages: where, which namespace, how secured. */
export function describeTemporal(settings: TemporalConnectionSettings): string {
  return `${settings.address} (namespace ${settings.namespace}, ${settings.security}${settings.profile ? `, profile ${settings.profile}` : ''})`;
}

/** Why a connection attempt failed, with what was tried and the usual causes. */
export function connectionFailure(settings: TemporalConnectionSettings, error: unknown): string {
  const reason = plainReason(error instanceof Error ? error.message : String(error));
  const hint =
    settings.security === 'plaintext'
      ? 'Is the server running? If it requires TLS, set TEMPORAL_TLS=true (and a client certificate for mTLS).'
      : 'Is the server running, and do TEMPORAL_TLS_SERVER_CA_CERT_PATH / TEMPORAL_TLS_SERVER_NAME match its certificate? An mTLS server also needs TEMPORAL_TLS_CLIENT_CERT_PATH and _KEY_PATH.';
  return `cannot reach Temporal at ${describeTemporal(settings)} (TEMPORAL_ADDRESS): ${reason}. ${hint}`;
}

/**
 * The worker's native connection fails with the Rust core's debug dump, e.g.
 * `tonic::transport::Error(Transport, ConnectError(ConnectError("tcp connect error", 127.0.0.1:1,
 * Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })))`: said in words
 * ("tcp connect error: Connection refused"). Any other message is returned as it is.
 */
export function plainReason(message: string): string {
  if (!/tonic::transport::Error|ConnectError\(|Os \{ code:/.test(message)) return message;
  const quoted = [...message.matchAll(/"([^"]+)"/g)].map((match) => match[1] as string);
  const words = [...new Set(quoted)].filter((text) => !/^[\d.:[\]]+$/.test(text));
  if (words.length > 0) return words.join(': ');
  const kind = /kind: (\w+)/.exec(message)?.[1];
  return kind ? `transport error (${kind})` : 'transport error';
}

/** The client's connection (`lazy`: opened on first use, so a process can start while Temporal is away). */
export async function connectTemporalClient(
  settings: TemporalConnectionSettings,
  options: { connectTimeoutMs?: number; lazy?: boolean } = {},
): Promise<Connection> {
  const connectionOptions = { ...settings.connectionOptions, connectTimeout: options.connectTimeoutMs };
  if (options.lazy) return Connection.lazy(connectionOptions);
  try {
    return await Connection.connect(connectionOptions);
  } catch (error) {
    throw new Error(connectionFailure(settings, error), { cause: error });
  }
}

/** The worker's native connection (loaded on demand: only the worker needs the native module). */
export async function connectTemporalWorker(settings: TemporalConnectionSettings): Promise<NativeConnection> {
  const { NativeConnection } = await import('@temporalio/worker');
  try {
    return await NativeConnection.connect(settings.connectionOptions);
  } catch (error) {
    throw new Error(connectionFailure(settings, error), { cause: error });
  }
}

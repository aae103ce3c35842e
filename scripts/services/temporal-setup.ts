// The library behind `npm run temporal:setup` (scripts/temporal-setup.ts is the CLI; scripts/dev.ts,
// scripts/test.ts, the stack and the bench call it too). Prepares a Temporal namespace for replyonce:
// created with a retention longer than AgentMail's ~27.5 h webhook retries (the dev server's default namespace keeps closed workflows only 24 h),
// and the workflows' custom search attributes. Idempotent; starts no server.
//
// On Temporal Cloud (and on a cluster that does not let this client administer namespaces) it
// cannot create anything: namespaces and search attributes are made with Cloud's own tooling. There
// it checks that the namespace and the search attributes exist and prints what to do when they do not.
import { Connection, isGrpcServiceError } from '@temporalio/client';
import { msToTs, tsToMs } from '@temporalio/common/lib/time';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import {
  connectionFailure,
  type TemporalConnectionOptions,
  type TemporalConnectionSettings,
} from '../../lib/temporal-connection';
import { SEARCH_ATTRIBUTES } from './temporal-dev-server';
import { SetupError, messageOf, sleep } from './main';

export { SEARCH_ATTRIBUTES };

export interface TemporalSetupOptions {
  /** A plaintext server's host:port (the dev server); or `connection` for TLS, mTLS, API keys. */
  address?: string;
  connection?: TemporalConnectionSettings;
  namespace: string;
  retentionDays?: number;
  /** How long to try reaching the server before giving up. */
  connectTimeoutMs?: number;
  /** Only check, create nothing (`--check`); always so on Temporal Cloud. */
  checkOnly?: boolean;
}

const DAY_MS = 24 * 60 * 60 * 1000;
type IndexedValueType = NonNullable<ReturnType<typeof encodeSearchAttributeIndexedValueType>>;
const KEYWORD = encodeSearchAttributeIndexedValueType('KEYWORD') as IndexedValueType;
/** gRPC status codes the server answers with. */
const ALREADY_EXISTS = 6;
const NOT_FOUND = 5;
/**
 * A new namespace, or a new search attribute, reaches the frontend's cache within the server's
 * namespace refresh interval (10 s by default); this leaves room for a loaded machine.
 */
const USABLE_TIMEOUT_MS = 30_000;
const PERMISSION_DENIED = 7;
const UNIMPLEMENTED = 12;
const INVALID_ARGUMENT = 3;

/** Temporal Cloud's endpoints: namespace endpoints (…tmprl.cloud) and regional API-key endpoints (…api.temporal.io). */
export function isTemporalCloud(address: string): boolean {
  return /\.(tmprl\.cloud|api\.temporal\.io):\d+$/.test(address);
}

export async function setupTemporal({
  address,
  connection: settings,
  namespace,
  retentionDays = 7,
  connectTimeoutMs = 5_000,
  checkOnly: onlyCheck = false,
}: TemporalSetupOptions): Promise<'created-or-updated' | 'checked'> {
  const target: TemporalConnectionSettings = settings ?? {
    address: address ?? 'localhost:7233',
    namespace,
    connectionOptions: { address: address ?? 'localhost:7233' },
    security: 'plaintext',
  };
  const connection = await connect(target, connectTimeoutMs);
  try {
    if (onlyCheck || isTemporalCloud(target.address)) {
      log(
        onlyCheck
          ? 'checking only (--check): nothing is created'
          : `${target.address} is Temporal Cloud: namespaces and search attributes are created with Cloud's tooling, not here; checking them`,
      );
      await checkOnly(connection, namespace, retentionDays);
      return 'checked';
    }
    try {
      await ensureNamespace(connection, namespace, retentionDays * DAY_MS);
    } catch (error) {
      if (!isGrpcServiceError(error) || ![PERMISSION_DENIED, UNIMPLEMENTED].includes(error.code)) throw error;
      log(`this client may not administer namespaces on ${target.address} (${messageOf(error)}); checking instead`);
      await checkOnly(connection, namespace, retentionDays);
      return 'checked';
    }
    await waitUntilUsable(connection, namespace, 'namespace');
    if (await ensureSearchAttributes(connection, namespace)) {
      await waitUntilUsable(connection, namespace, 'search attributes');
    }
    return 'created-or-updated';
  } finally {
    await connection.close();
  }
}

async function connect(settings: TemporalConnectionSettings, connectTimeoutMs: number): Promise<Connection> {
  const options: TemporalConnectionOptions & { connectTimeout: number } = {
    ...settings.connectionOptions,
    connectTimeout: connectTimeoutMs,
  };
  try {
    return await Connection.connect(options);
  } catch (error) {
    throw new SetupError(connectionFailure(settings, error));
  }
}

/**
 * Where this client cannot create things (Temporal Cloud): the namespace must exist, keep closed
 * workflows long enough, and know the search attributes. Says what to do for each one missing.
 */
async function checkOnly(connection: Connection, namespace: string, retentionDays: number): Promise<void> {
  const problems: string[] = [];
  const described = await describe(connection, namespace).catch((error: unknown) => {
    throw new SetupError(`cannot describe namespace ${namespace}: ${messageOf(error)}`);
  });
  if (described === undefined) {
    throw new SetupError(
      `namespace ${namespace} does not exist. Create it in Temporal Cloud's UI (Namespaces → Create) or with ` +
        `\`tcld namespace create --namespace ${namespace} --region <region> --retention-days ${retentionDays}\`, then run this again.`,
    );
  }
  const currentMs = tsToMs(described.config?.workflowExecutionRetentionTtl);
  if (currentMs < retentionDays * DAY_MS) {
    problems.push(
      `its retention is ${formatDays(currentMs)}; replyonce needs at least ${retentionDays} days (longer than AgentMail's ~27.5 h of webhook retries): ` +
        `raise it in the Cloud UI or with \`tcld namespace retention set --namespace ${namespace} --retention-days ${retentionDays}\``,
    );
  }
  await waitUntilUsable(connection, namespace, 'namespace'); // a namespace created a moment ago may not be served yet
  const missing: string[] = [];
  for (const name of SEARCH_ATTRIBUTES) {
    try {
      await connection.workflowService.listWorkflowExecutions({
        namespace,
        pageSize: 1,
        query: `${name} = 'setup-probe'`,
      });
    } catch (error) {
      if (isGrpcServiceError(error) && (error.code as number) === INVALID_ARGUMENT) missing.push(name);
      else throw error;
    }
  }
  if (missing.length > 0) {
    problems.push(
      `it lacks the search attributes ${missing.join(', ')} (type Keyword): add them in the Cloud UI (Namespace → Search Attributes) or with ` +
        `\`tcld namespace search-attributes add --namespace ${namespace} ${missing.map((n) => `--search-attribute ${n}=Keyword`).join(' ')}\``,
    );
  }
  if (problems.length > 0) {
    throw new SetupError(`namespace ${namespace} is not ready for replyonce:\n  - ${problems.join('\n  - ')}`);
  }
  log(
    `namespace ${namespace}: exists, retention ${formatDays(currentMs)}, search attributes ${SEARCH_ATTRIBUTES.join(', ')} present`,
  );
}

async function ensureNamespace(connection: Connection, namespace: string, retentionMs: number): Promise<void> {
  const service = connection.workflowService;
  if ((await describe(connection, namespace)) === undefined) {
    try {
      await service.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(retentionMs) });
      log(`registered namespace ${namespace} (retention ${retentionMs / DAY_MS} days)`);
      return;
    } catch (error) {
      if (!(isGrpcServiceError(error) && (error.code as number) === ALREADY_EXISTS)) throw error; // a concurrent set-up won
    }
  }
  const described = await describe(connection, namespace);
  const currentMs = tsToMs(described?.config?.workflowExecutionRetentionTtl);
  if (currentMs < retentionMs) {
    await service.updateNamespace({ namespace, config: { workflowExecutionRetentionTtl: msToTs(retentionMs) } });
    log(`namespace ${namespace}: retention raised from ${formatDays(currentMs)} to ${formatDays(retentionMs)}`);
  }
}

async function describe(connection: Connection, namespace: string) {
  try {
    return await connection.workflowService.describeNamespace({ namespace });
  } catch (error) {
    if (isGrpcServiceError(error) && (error.code as number) === NOT_FOUND) return undefined;
    throw error;
  }
}

/** Returns whether it added any. */
async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<boolean> {
  const existing = await customSearchAttributes(connection, namespace);
  for (const name of SEARCH_ATTRIBUTES) {
    const type = existing[name];
    if (type !== undefined && type !== (KEYWORD as number)) {
      throw new SetupError(
        `namespace ${namespace}: search attribute ${name} exists with another type than Keyword; the workflows need Keyword`,
      );
    }
  }
  const missing = SEARCH_ATTRIBUTES.filter((name) => existing[name] === undefined);
  if (missing.length === 0) return false;
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, KEYWORD])),
    });
    log(`namespace ${namespace}: added search attributes ${missing.join(', ')}`);
  } catch (error) {
    if (!(isGrpcServiceError(error) && (error.code as number) === ALREADY_EXISTS)) throw error;
  }
  return true;
}

async function customSearchAttributes(connection: Connection, namespace: string): Promise<Record<string, number>> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  return customAttributes ?? {};
}

/**
 * A new namespace, or a new search attribute, is usable once the frontend's namespace cache has
 * it: until then it answers NOT_FOUND, or rejects a query naming the attribute.
 */
async function waitUntilUsable(
  connection: Connection,
  namespace: string,
  what: 'namespace' | 'search attributes',
): Promise<void> {
  const query = what === 'namespace' ? '' : SEARCH_ATTRIBUTES.map((name) => `${name} = 'setup-probe'`).join(' AND ');
  const deadline = Date.now() + USABLE_TIMEOUT_MS;
  for (;;) {
    try {
      await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1, query });
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new SetupError(
          `namespace ${namespace}: the ${what} did not become usable within ${USABLE_TIMEOUT_MS / 1000} s: ${messageOf(error)}`,
        );
      }
    }
    await sleep(200);
  }
}

function formatDays(ms: number): string {
  const days = Math.round((ms / DAY_MS) * 100) / 100;
  return `${days} day${days === 1 ? '' : 's'}`;
}

function log(message: string): void {
  console.error(`[temporal] ${message}`);
}

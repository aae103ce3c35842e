// Prepares a Temporal namespace for replyonce: created with a retention longer than AgentMail's
// ~27.5 h webhook retries (the dev server's default namespace keeps closed workflows only 24 h),
// and the workflows' custom search attributes. Idempotent; starts no server.
//
//   npm run temporal:setup        TEMPORAL_ADDRESS (localhost:7233), TEMPORAL_NAMESPACE (replyonce)
import { Connection, isGrpcServiceError } from '@temporalio/client';
import { msToTs, tsToMs } from '@temporalio/common/lib/time';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTES } from './services/temporal-dev-server';
import { SetupError, messageOf, runMain, sleep } from './services/main';

export { SEARCH_ATTRIBUTES };

export interface TemporalSetupOptions {
  address: string;
  namespace: string;
  retentionDays?: number;
  /** How long to try reaching the server before giving up. */
  connectTimeoutMs?: number;
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

export async function setupTemporal({
  address,
  namespace,
  retentionDays = 7,
  connectTimeoutMs = 5_000,
}: TemporalSetupOptions): Promise<void> {
  const connection = await connect(address, connectTimeoutMs);
  try {
    await ensureNamespace(connection, namespace, retentionDays * DAY_MS);
    await waitUntilUsable(connection, namespace, 'namespace');
    if (await ensureSearchAttributes(connection, namespace)) {
      await waitUntilUsable(connection, namespace, 'search attributes');
    }
  } finally {
    await connection.close();
  }
}

async function connect(address: string, connectTimeoutMs: number): Promise<Connection> {
  try {
    return await Connection.connect({ address, connectTimeout: connectTimeoutMs });
  } catch (error) {
    throw new SetupError(`cannot reach the Temporal server at ${address} (TEMPORAL_ADDRESS): ${messageOf(error)}`);
  }
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

if (require.main === module) {
  runMain(async () => {
    const address = process.env.TEMPORAL_ADDRESS || 'localhost:7233';
    const namespace = process.env.TEMPORAL_NAMESPACE || 'replyonce';
    await setupTemporal({ address, namespace });
    console.error(`[temporal] namespace ${namespace} on ${address} is ready`);
  });
}

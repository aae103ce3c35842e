// Temporal's own server, its SQL schema tool and the Web UI server, built from the Go module proxy
// at pinned versions the first time the production stack (or its tests) needs them, and cached
// beside the CLI outside the checkout (~/.cache/replyonce/bin), like scripts/setup.sh does for the CLI.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { SetupError } from './main';

/** Matches the server the CLI (scripts/setup.sh) embeds, so the dev server and the stack run the same code. */
export const TEMPORAL_SERVER_VERSION = 'v1.29.1';
/** The Web UI server release the CLI 1.5 line embeds, built on its own here. */
export const TEMPORAL_UI_SERVER_VERSION = 'v2.42.1';

const SERVER_MODULE = 'go.temporal.io/server';
const UI_MODULE = 'github.com/temporalio/ui-server/v2';
const CACHE_BIN = path.join(process.env.REPLYONCE_CACHE ?? path.join(os.homedir(), '.cache', 'replyonce'), 'bin');

interface Binary {
  /** File name in the cache, versioned so an upgrade builds anew. */
  file: string;
  /** `go install` target. */
  target: string;
  /** What `go install` names the result. */
  built: string;
}

const BINARIES = {
  server: {
    file: `temporal-server-${TEMPORAL_SERVER_VERSION}`,
    target: `${SERVER_MODULE}/cmd/server@${TEMPORAL_SERVER_VERSION}`,
    built: 'server',
  },
  sqlTool: {
    file: `temporal-sql-tool-${TEMPORAL_SERVER_VERSION}`,
    target: `${SERVER_MODULE}/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}`,
    built: 'sql',
  },
  uiServer: {
    file: `temporal-ui-server-${TEMPORAL_UI_SERVER_VERSION}`,
    target: `${UI_MODULE}/cmd/server@${TEMPORAL_UI_SERVER_VERSION}`,
    built: 'server',
  },
} satisfies Record<string, Binary>;

export interface TemporalBinaries {
  server: string;
  sqlTool: string;
  uiServer: string;
  /** The server module's Postgres schemas (…/schema/postgresql/v12), read by the schema tool. */
  postgresSchemaDir: string;
  /** Seconds spent building (0 when everything was cached). */
  buildSeconds: number;
}

const run = promisify(execFile);

/** Returns the three binaries, building the missing ones (minutes the first time; the Go build cache helps). */
export async function ensureTemporalBinaries(log: (line: string) => void = defaultLog): Promise<TemporalBinaries> {
  const started = Date.now();
  const go = await findGo();
  for (const binary of Object.values(BINARIES)) {
    const destination = path.join(CACHE_BIN, binary.file);
    if (existsSync(destination)) continue;
    const t0 = Date.now();
    log(`building ${binary.target} into ${destination} (first time only; several minutes)…`);
    await build(go, binary, destination);
    log(`built ${binary.file} in ${Math.round((Date.now() - t0) / 1000)} s`);
  }
  const { stdout } = await run(go, ['mod', 'download', '-json', `${SERVER_MODULE}@${TEMPORAL_SERVER_VERSION}`]);
  const moduleDir = (JSON.parse(stdout) as { Dir?: string }).Dir;
  const postgresSchemaDir = moduleDir && path.join(moduleDir, 'schema', 'postgresql', 'v12');
  if (!postgresSchemaDir || !existsSync(path.join(postgresSchemaDir, 'temporal', 'versioned'))) {
    throw new SetupError(`the Temporal server module has no Postgres schemas under ${String(postgresSchemaDir)}`);
  }
  return {
    server: path.join(CACHE_BIN, BINARIES.server.file),
    sqlTool: path.join(CACHE_BIN, BINARIES.sqlTool.file),
    uiServer: path.join(CACHE_BIN, BINARIES.uiServer.file),
    postgresSchemaDir,
    buildSeconds: Math.round((Date.now() - started) / 100) / 10,
  };
}

async function build(go: string, binary: Binary, destination: string): Promise<void> {
  mkdirSync(CACHE_BIN, { recursive: true });
  const tmp = mkdtempSync(path.join(CACHE_BIN, '.build-'));
  try {
    // Static and stripped, as Temporal's own release builds are.
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(go, ['install', '-ldflags', '-s -w', binary.target], {
        env: { ...process.env, CGO_ENABLED: '0', GOBIN: tmp, GOFLAGS: '-buildvcs=false' },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) {
      throw new SetupError(
        `building ${binary.target} failed (exit ${code}, see above); it needs Go 1.21+ and the Go module proxy`,
      );
    }
    renameSync(path.join(tmp, binary.built), destination); // atomic: a concurrent reader sees it whole or not at all
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function findGo(): Promise<string> {
  for (const candidate of ['go', '/usr/local/go/bin/go', '/usr/lib/go/bin/go']) {
    try {
      await run(candidate, ['version']);
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new SetupError(
    'Go is needed once, to build the Temporal server, its schema tool and the Web UI server (https://go.dev/doc/install)',
  );
}

function defaultLog(line: string): void {
  console.error(`[temporal-build] ${line}`);
}

if (require.main === module) {
  ensureTemporalBinaries().then(
    (binaries) => console.error(`[temporal-build] ready (${binaries.buildSeconds} s): ${JSON.stringify(binaries)}`),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}

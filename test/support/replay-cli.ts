import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { testEnv } from './env';
import type { Harness } from './harness';

const repoRoot = path.resolve(__dirname, '..', '..');

/** `npm run replay -- …` as an operator types it, against the suite's Temporal and this harness's queue and sandbox. */
export function runReplayCli(h: Harness, args: string[]): { code: number | null; output: string } {
  const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'scripts', 'replay.ts'), ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: testEnv.temporalAddress,
      TEMPORAL_NAMESPACE: testEnv.namespace,
      TEMPORAL_TASK_QUEUE: h.taskQueue,
      DATABASE_URL: testEnv.databaseUrl,
      AGENTMAIL_API_KEY: h.apiKey,
      AGENTMAIL_BASE_URL: h.sandboxUrl,
    },
  });
  return { code: run.status, output: `${run.stdout}${run.stderr}` };
}

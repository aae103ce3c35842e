import type { BenchContext } from './context';
import { bodiesLike, seedMessages, type SeededMessage } from './deliveries';
import { startBaseline, startOurs, startStartOnly, type OurStack } from './stack';

/**
 * The two sides of every comparison, behind one shape: a server to POST deliveries to, bodies
 * for new events, and the processes whose CPU is counted.
 *
 * - ours: the API and a worker on a fresh task queue (the worker runs, as in production, so
 *   each new message's workflow competes for the same two cores). Its events name messages
 *   created in the sandbox, so the workflows do their real work.
 * - baseline: the Express handler. Its events are the same bytes with other ids (it does not
 *   look the message up anywhere), so both sides parse and verify payloads of the same size.
 * - start-only: a reference for the unique-message search only — the Temporal start alone
 *   (bench/baseline/start-only.ts), no worker: the server's own ceiling.
 */

export type SideName = 'ours' | 'baseline' | 'start-only';

export interface Side {
  name: SideName;
  url: string;
  /** pids whose CPU this side spends. */
  servers: Record<string, number | undefined>;
  /** Bodies for `count` events nobody has seen (ours: messages seeded in the sandbox). */
  newEvents(count: number): Promise<string[]>;
  /** Waits (bounded) until the work behind every event so far is done (ours: every reply sent). */
  settle(timeoutMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

export const WEBHOOK_PATH = '/webhooks/agentmail';

export async function startOurSide(
  context: BenchContext,
  options: {
    cpuProfileDir?: string | undefined;
    resetSandbox?: boolean;
    worker?: boolean;
    /** Extra environment for the API and the worker. */
    env?: Record<string, string> | undefined;
  } = {},
): Promise<Side & { stack: OurStack }> {
  if (options.resetSandbox !== false) await resetSandbox(context);
  const worker = options.worker !== false;
  const stack = await startOurs(context.env, context.sandbox, context.secrets, {
    cpuProfileDir: options.cpuProfileDir,
    worker,
    ...(options.env ? { env: options.env } : {}),
  });
  let seeded = 0;
  return {
    name: 'ours',
    url: stack.apiUrl,
    stack,
    servers: { api: stack.api.pid, ...(worker ? { worker: stack.worker.pid } : {}) },
    newEvents: async (count) => {
      seeded += count;
      return (await seedMessages(context.sandbox.url, count)).map((m) => m.body);
    },
    settle: async (timeoutMs) => {
      if (!worker) return true;
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if ((await repliesSent(context)) >= seeded) return true;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      return false;
    },
    stop: () => stack.stop(),
  };
}

let template: SeededMessage | undefined;

export async function startBaselineSide(
  context: BenchContext,
  options: { cpuProfileDir?: string | undefined } = {},
): Promise<Side> {
  return referenceSide(context, 'baseline', await startBaseline(context.env, context.secrets, options));
}

export async function startStartOnlySide(context: BenchContext): Promise<Side> {
  return referenceSide(context, 'start-only', await startStartOnly(context.env));
}

/** A reference server as a side: it looks no message up, so its events are the template's bytes with new ids. */
async function referenceSide(
  context: BenchContext,
  name: SideName,
  server: { url: string; process: { pid: number | undefined }; stop(): Promise<void> },
): Promise<Side> {
  template ??= (await seedMessages(context.sandbox.url, 1))[0] as SeededMessage;
  const shape = template;
  return {
    name,
    url: server.url,
    servers: { [name]: server.process.pid },
    newEvents: async (count) => bodiesLike(shape, count),
    settle: async () => true,
    stop: () => server.stop(),
  };
}

export async function resetSandbox(context: BenchContext): Promise<void> {
  const response = await fetch(`${context.sandbox.url}/_sandbox/reset`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`the sandbox did not reset: ${response.status}`);
}

/** Replies the sandbox has accepted since its last reset. */
export async function repliesSent(context: BenchContext): Promise<number> {
  const response = await fetch(`${context.sandbox.url}/_sandbox/state`);
  return ((await response.json()) as { sent: number }).sent;
}

/** Both sides in turn, the order alternating by repeat so drift on a noisy machine hits both alike. */
export function sidesInOrder(repeat: number): SideName[] {
  return repeat % 2 === 0 ? ['ours', 'baseline'] : ['baseline', 'ours'];
}

// What our two Temporal launchers share (the dev server, scripts/services/temporal-dev-server.ts,
// and Temporal's own server, scripts/services/temporal-stack.ts): waiting for the frontend, stopping.
import type { ChildProcess } from 'node:child_process';
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { tail } from './log-tail';
import { SetupError, messageOf, sleep } from './main';

/**
 * Waits until a Temporal server we started answers on its frontend, or says why not: the
 * process exited (with its log's tail), or it did not answer in time (with the last error).
 */
export async function waitForTemporalFrontend(server: {
  /** "the Temporal dev server", "the Temporal server": how errors name it. */
  name: string;
  connection: ConnectionOptions & { address: string };
  exited: Promise<number | null>;
  logFile: string;
  timeoutMs: number;
  pollMs: number;
  /** Also wait for this namespace: a server's frontend answers before it has created its system namespace. */
  namespace?: string;
}): Promise<void> {
  const deadline = Date.now() + server.timeoutMs;
  let exitCode: number | null | undefined;
  void server.exited.then((code) => (exitCode = code));
  let lastError = 'no answer yet';
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      throw new SetupError(
        `${server.name} exited (code ${exitCode}) before it was ready:\n${tail(server.logFile)}\n  (full log: ${server.logFile})`,
      );
    }
    try {
      const connection = await Connection.connect(server.connection);
      try {
        await connection.workflowService.getSystemInfo({});
        if (server.namespace) await connection.workflowService.describeNamespace({ namespace: server.namespace });
        return;
      } finally {
        await connection.close();
      }
    } catch (error) {
      lastError = messageOf(error);
    }
    await sleep(server.pollMs);
  }
  throw new SetupError(
    `${server.name} on ${server.connection.address} did not answer within ${server.timeoutMs / 1000} s (${lastError}); see ${server.logFile}`,
  );
}

/** SIGTERM, then SIGKILL once `graceMs` have passed; resolves when the process has exited. */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

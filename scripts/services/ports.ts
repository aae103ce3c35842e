// TCP ports on the loopback interface: a free one, a taken one, one that starts answering.
import { createConnection, createServer } from 'node:net';
import { SetupError, sleep } from './main';

export const LOOPBACK = '127.0.0.1';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, LOOPBACK, () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export async function isPortFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, LOOPBACK, () => server.close(() => resolve(true)));
  });
}

/** Fails with `hint` when something already listens on the port. */
export async function assertPortFree(port: number, what: string, hint: string): Promise<number> {
  if (!(await isPortFree(port))) throw new SetupError(`port ${port} on ${LOOPBACK} (${what}) is in use. ${hint}`);
  return port;
}

/** Resolves once a TCP connection succeeds; false if `timeoutMs` passes or `abandon` resolves first. */
export async function waitForPort(port: number, timeoutMs: number, abandon?: Promise<unknown>): Promise<boolean> {
  let abandoned = false;
  void abandon?.then(() => (abandoned = true));
  const deadline = Date.now() + timeoutMs;
  while (!abandoned && Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: LOOPBACK, port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return true;
    await sleep(200);
  }
  return false;
}

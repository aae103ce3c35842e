// A TCP load balancer on loopback that hands each new connection to the next backend in turn,
// skipping one that refuses: the stand-in for the load balancer in front of the API replicas.
import net from 'node:net';
import { LOOPBACK } from './ports';

export interface RoundRobin {
  port: number;
  /** Resets every open connection and refuses new ones until restore(): a backend's restart, as clients see it. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startRoundRobin(port: number, backends: number[]): Promise<RoundRobin> {
  let next = 0;
  let cut = false;
  const sockets = new Set<net.Socket>();
  const connect = (client: net.Socket, tries: number) => {
    const backend = backends[next++ % backends.length] ?? 0;
    const upstream = net.connect(backend, LOOPBACK);
    upstream.once('connect', () => {
      client.pipe(upstream).pipe(client);
      // A client that dies without a FIN (SIGKILL with data in flight: an RST) never ends the pipe:
      // close its upstream too, or the server keeps the session — and whatever locks it holds.
      client.once('close', () => upstream.destroy());
    });
    upstream.once('error', () => {
      if (client.destroyed) return;
      if (tries + 1 < backends.length) connect(client, tries + 1);
      else client.destroy();
    });
    sockets.add(upstream);
    upstream.once('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
  };
  const server = net.createServer((client) => {
    if (cut) {
      client.resetAndDestroy();
      return;
    }
    sockets.add(client);
    client.on('error', () => undefined);
    client.once('close', () => sockets.delete(client));
    connect(client, 0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, LOOPBACK, resolve);
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      cut = true;
      for (const socket of sockets) socket.resetAndDestroy();
    },
    restore() {
      cut = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

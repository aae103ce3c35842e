import net from 'node:net';

/**
 * A TCP proxy on loopback in front of a real server (Postgres, Temporal), so a test can make
 * that dependency unreachable and bring it back without stopping the shared server.
 * Cut: open connections are reset and new ones are reset on arrival.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.accept(client));
  private isCut = false;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static async start(target: string): Promise<TcpProxy> {
    const [host = '127.0.0.1', port = ''] = target.split(':');
    const proxy = new TcpProxy(host, Number(port));
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  cut(): void {
    this.isCut = true;
    for (const socket of this.sockets) socket.resetAndDestroy();
  }

  restore(): void {
    this.isCut = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private accept(client: net.Socket): void {
    if (this.isCut) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.targetPort, this.targetHost);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }
}

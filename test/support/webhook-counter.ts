import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A Slack-compatible incoming webhook on loopback that keeps every body posted to it (the count is the test). */
export class WebhookCounter {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly bodies: Array<{ text: string }>,
  ) {}

  static async start(): Promise<WebhookCounter> {
    const bodies: Array<{ text: string }> = [];
    const server = createServer((request, response) => {
      let raw = '';
      request.setEncoding('utf8').on('data', (chunk: string) => (raw += chunk));
      request.on('end', () => {
        try {
          bodies.push(JSON.parse(raw) as { text: string });
        } catch {
          bodies.push({ text: raw });
        }
        response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new WebhookCounter(server, `http://127.0.0.1:${port}/hook`, bodies);
  }

  /** The notifications whose text mentions `needle` (a desk link names one message). */
  about(needle: string): Array<{ text: string }> {
    return this.bodies.filter((body) => body.text.includes(needle));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

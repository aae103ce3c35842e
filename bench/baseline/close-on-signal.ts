import type { Server } from 'node:http';

/** SIGTERM/SIGINT: stop accepting, let in-flight requests finish, close `resources`, exit. */
export function closeOnSignal(server: Server, resources: () => Promise<void>): void {
  const shutdown = () =>
    server.close(
      () =>
        void resources().then(
          () => process.exit(0),
          () => process.exit(1),
        ),
    );
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

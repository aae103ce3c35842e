// How every script under scripts/ runs as a command: errors end as one readable line and exit 1 at once.

/** An expected failure (bad configuration, a server that is down): printed without a stack. */
export class SetupError extends Error {
  override name = 'SetupError';
}

export function runMain(main: () => Promise<number | void>): void {
  main().then(
    (code) => {
      if (typeof code === 'number') process.exitCode = code;
    },
    (error: unknown) => {
      const verbose = process.env.DEBUG !== undefined;
      if (error instanceof Error && !verbose) {
        console.error(`error: ${error.message}${error instanceof SetupError ? '' : '\n  (set DEBUG=1 for the stack)'}`);
      } else {
        console.error(error);
      }
      // A process that has printed a fatal error exits, even if a socket or timer is still open
      // (a gRPC channel retrying a handshake that never completes).
      process.exit(1);
    },
  );
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// The Node processes `npm run dev` runs (sandbox, worker, API): started with tsx, their output
// prefixed line by line, stopped in reverse order, and one dying unexpectedly stops the rest.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

/** Long enough for a worker to finish its in-flight activity tasks; past it, SIGKILL. */
const STOP_GRACE_MS = 15_000;
const COLOURS = [36, 35, 33, 32, 34]; // cyan, magenta, yellow, green, blue

interface Managed {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
}

export class ProcessGroup {
  private readonly running: Managed[] = [];
  private stopping = false;
  private failure: { name: string; code: number | null; signal: string | null } | undefined;
  private readonly prefixWidth: number;
  private readonly names: string[];
  private notifyFailure: (() => void) | undefined;
  /** Resolves when a process exits on its own (not by stopAll). */
  readonly failed = new Promise<void>((resolve) => (this.notifyFailure = resolve));

  constructor(
    private readonly cwd: string,
    names: string[],
  ) {
    this.names = names;
    this.prefixWidth = Math.max(...names.map((name) => name.length));
    process.once('exit', () => {
      for (const { child } of this.running) if (child.exitCode === null) child.kill('SIGKILL');
    });
  }

  /** Runs `node --import tsx <file>` with this environment; returns its pid. */
  start(name: string, file: string, env: NodeJS.ProcessEnv): number | undefined {
    // Its own process group: Ctrl-C reaches only us, and we stop each process once, in order.
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: this.cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const prefix = this.prefix(name);
    pipeLines(child.stdout, process.stdout, prefix);
    pipeLines(child.stderr, process.stderr, prefix);
    const exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        if (!this.stopping) {
          this.failure ??= { name, code, signal };
          console.error(`${prefix} exited unexpectedly (${signal ?? `code ${code}`}); stopping the rest`);
          this.notifyFailure?.();
        }
        resolve();
      });
      child.once('error', (error) => {
        console.error(`${prefix} could not start: ${error.message}`);
        this.failure ??= { name, code: null, signal: null };
        this.notifyFailure?.();
        resolve();
      });
    });
    this.running.push({ name, child, exited });
    return child.pid;
  }

  get failedProcess(): string | undefined {
    return this.failure?.name;
  }

  /** SIGTERM to each process, newest first, waiting for each to exit. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    for (const { name, child, exited } of [...this.running].reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      console.error(`${this.prefix(name)} stopping…`);
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        console.error(`${this.prefix(name)} did not stop within ${STOP_GRACE_MS / 1000} s; killing it`);
        child.kill('SIGKILL');
      }, STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
  }

  private prefix(name: string): string {
    const label = name.padEnd(this.prefixWidth);
    if (!process.stdout.isTTY || process.env.NO_COLOR) return `${label} |`;
    const colour = COLOURS[Math.max(0, this.names.indexOf(name)) % COLOURS.length] ?? 36;
    return `\u001b[${colour}m${label} |\u001b[0m`;
  }
}

function pipeLines(from: Readable | null, to: Writable, prefix: string): void {
  if (!from) return;
  const lines = createInterface({ input: from, crlfDelay: Infinity });
  lines.on('line', (line) => to.write(`${prefix} ${line}\n`));
}

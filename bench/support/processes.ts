import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, writeSync } from 'node:fs';
import path from 'node:path';
import { cpuSecondsMatching, machineCpuSeconds, processCpuSeconds } from '../../scripts/services/cpu';
import { tail } from '../../scripts/services/log-tail';

/**
 * The servers under test run as processes of their own (never in the load generator's event
 * loop): started with `node <file>` on the compiled JavaScript (or `--import tsx` on the
 * TypeScript), their output appended to a log file, stopped with SIGTERM (so a --cpu-prof
 * profile is written), and measured in CPU seconds from /proc.
 */

/** A worker finishes its in-flight tasks within this; past it, SIGKILL. */
const STOP_GRACE_MS = 15_000;

export interface ServerSpec {
  name: string;
  /** Entry file, e.g. .data/bench/dist/api/main.js (or api/main.ts with runtime tsx). */
  entry: string;
  env: NodeJS.ProcessEnv;
  logFile: string;
  /** Write a V8 CPU profile here on exit (node --cpu-prof). */
  cpuProfileDir?: string | undefined;
  tsx?: boolean;
}

export class ServerProcess {
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  private constructor(
    readonly spec: ServerSpec,
    private readonly child: ChildProcess,
    /** Where this process's lines start in its (shared, appended) log file. */
    private readonly logOffset: number,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 : null);
        resolve(this.exitCode);
      });
      child.once('error', () => {
        this.exitCode = 127;
        resolve(127);
      });
    });
  }

  static start(spec: ServerSpec): ServerProcess {
    mkdirSync(path.dirname(spec.logFile), { recursive: true });
    const fd = openSync(spec.logFile, 'a');
    writeSync(fd, `\n--- ${new Date().toISOString()} ${spec.name}: ${spec.entry}\n`);
    const logOffset = fstatSync(fd).size;
    const args = [
      ...(spec.cpuProfileDir
        ? [
            '--cpu-prof',
            '--cpu-prof-dir',
            spec.cpuProfileDir,
            '--cpu-prof-name',
            `${spec.name}-${Date.now()}.cpuprofile`,
          ]
        : []),
      ...(spec.tsx ? ['--import', 'tsx'] : []),
      spec.entry,
    ];
    if (spec.cpuProfileDir) mkdirSync(spec.cpuProfileDir, { recursive: true });
    const child = spawn(process.execPath, args, { env: spec.env, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const server = new ServerProcess(spec, child, logOffset);
    // A bench that dies must not leave its servers running.
    const kill = () => child.kill('SIGKILL');
    process.once('exit', kill);
    void server.exited.then(() => process.removeListener('exit', kill));
    return server;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Polls `ready` until it holds; fails with the log's tail if the process exits or time runs out. */
  async waitUntil(ready: () => Promise<boolean> | boolean, what: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.running)
        throw new Error(`${this.spec.name} exited (code ${this.exitCode}) before ${what}:\n${tail(this.spec.logFile)}`);
      if (await Promise.resolve(ready()).catch(() => false)) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(
      `${this.spec.name}: timed out after ${timeoutMs / 1000} s waiting for ${what}:\n${tail(this.spec.logFile)}`,
    );
  }

  /** Whether the log has a JSON line whose msg is `msg`; returns that line. */
  logLine(msg: string): Record<string, unknown> | undefined {
    const own = this.readOwnLog(1024 * 1024);
    const marker = `"msg":"${msg}"`;
    const line = own.split('\n').find((l) => l.includes(marker));
    if (!line) return undefined;
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }

  /** The first `limit` bytes this process wrote to its log. */
  private readOwnLog(limit: number): string {
    try {
      const fd = openSync(this.spec.logFile, 'r');
      try {
        const buffer = Buffer.alloc(limit);
        const read = readSync(fd, buffer, 0, limit, this.logOffset);
        return buffer.subarray(0, read).toString('utf8');
      } finally {
        closeSync(fd);
      }
    } catch {
      return '';
    }
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.exited;
    clearTimeout(timer);
  }
}

// --- CPU accounting from /proc (scripts/services/cpu.ts reads it) ---------------------------

export interface CpuSnapshot {
  at: number;
  processes: Record<string, number>;
  machine: { busy: number; total: number };
}

/** Reads the CPU counters of named processes (pid or a command-line fragment) and the machine. */
export function cpuSnapshot(sources: Record<string, number | string>): CpuSnapshot {
  const processes: Record<string, number> = {};
  for (const [name, source] of Object.entries(sources)) {
    processes[name] = typeof source === 'number' ? processCpuSeconds(source) : cpuSecondsMatching(source);
  }
  return { at: Date.now(), processes, machine: machineCpuSeconds() };
}

export interface CpuUsage {
  /** CPU seconds each used between the snapshots. */
  seconds: Record<string, number>;
  /** Share of the machine's cores busy (0..1), everyone's work included. */
  machineBusy: number;
  wallSeconds: number;
}

export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): CpuUsage {
  const seconds: Record<string, number> = {};
  for (const [name, value] of Object.entries(after.processes))
    seconds[name] = value - (before.processes[name] ?? Number.NaN);
  const total = after.machine.total - before.machine.total;
  return {
    seconds,
    machineBusy: total > 0 ? (after.machine.busy - before.machine.busy) / total : Number.NaN,
    wallSeconds: (after.at - before.at) / 1000,
  };
}

/**
 * CPU seconds (user + system) of this process's children that have exited and been waited for
 * (/proc/self/stat's cutime and cstime). A command the bench runs to its end (`npm run rehearse`)
 * can no longer be read at /proc/<pid> once it has exited; its whole CPU lands here instead.
 */
export function exitedChildrenCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100; // USER_HZ
}

/**
 * CPU seconds, from now until `stop()`, of every process whose command line holds `fragment`,
 * those that end meanwhile included (up to their last sample, every `everyMs`): the Postgres
 * backends of a command that exits before the run is read (`npm run rehearse`'s connections close
 * with it, and a snapshot at the end finds them gone). Processes seen at the start count from
 * their reading then; later ones from their start.
 */
export function sampleCpuMatching(fragment: string, everyMs = 250): { stop(): number } {
  const ignored = new Set<string>();
  const readings = new Map<string, { first: number; last: number }>();
  let initial = true;
  const sample = () => {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || ignored.has(entry)) continue;
      try {
        if (!readings.has(entry) && !readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(fragment)) {
          ignored.add(entry);
          continue;
        }
        const seconds = processCpuSeconds(Number(entry));
        if (!Number.isFinite(seconds)) continue;
        const seen = readings.get(entry);
        if (seen) seen.last = seconds;
        else readings.set(entry, { first: initial ? seconds : 0, last: seconds });
      } catch {
        // gone meanwhile
      }
    }
    initial = false;
  };
  sample();
  const timer = setInterval(sample, everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
      return [...readings.values()].reduce((sum, r) => sum + (r.last - r.first), 0);
    },
  };
}

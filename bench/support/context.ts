import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import type { BenchOptions } from '../options';
import type { Signer } from './deliveries';
import { DATA, DATABASE, type Environment } from './environment';
import { cpuBetween, cpuSnapshot, type CpuSnapshot, type CpuUsage } from './processes';
import type { Sandbox, Secrets } from './stack';

/** What every scenario gets: the services, the options, a signer, progress output and CPU accounting. */
export interface BenchContext {
  options: BenchOptions;
  env: Environment;
  secrets: Secrets;
  sandbox: Sandbox;
  signer: Signer;
  profileDir: string;
  log(message: string): void;
}

export const PROFILE_DIR = path.join(DATA, 'profiles');

const startedAt = Date.now();

export function progress(message: string): void {
  const elapsed = Math.round((Date.now() - startedAt) / 1000);
  const stamp = `${String(Math.floor(elapsed / 60)).padStart(2, '0')}:${String(elapsed % 60).padStart(2, '0')}`;
  process.stderr.write(`[bench ${stamp}] ${message}\n`);
}

export const loadAverage = (): [number, number, number] =>
  loadavg().map((v) => Number(v.toFixed(2))) as [number, number, number];

/**
 * CPU seconds of the processes taking part, between two points: the servers under test, the
 * Temporal server, our database's Postgres backends, the sandbox, and this process (the load
 * generator). The machine's busy share includes every other process too (a noisy neighbour).
 */
export class CpuMeter {
  private before: CpuSnapshot;

  constructor(private readonly sources: Record<string, number | string>) {
    this.before = cpuSnapshot(sources);
  }

  static forRun(context: BenchContext, servers: Record<string, number | undefined>): CpuMeter {
    const sources: Record<string, number | string> = {
      'load generator': process.pid,
      sandbox: context.sandbox.process.pid,
      postgres: ` ${DATABASE} `,
    };
    if (context.env.temporalPid !== undefined) sources.temporal = context.env.temporalPid;
    if (context.env.temporalPostgres) sources['temporal postgres'] = context.env.temporalPostgres;
    for (const [name, pid] of Object.entries(servers)) if (pid !== undefined) sources[name] = pid;
    return new CpuMeter(sources);
  }

  read(): CpuUsage {
    return cpuBetween(this.before, cpuSnapshot(this.sources));
  }
}

/**
 * Share of the machine (0..1) busy with processes that are not part of the bench: other users'
 * test runs and the like. The load average cannot say this, since it counts the bench's own work.
 */
export function othersBusy(usage: CpuUsage): number {
  const cores = cpus().length;
  const ours = Object.values(usage.seconds)
    .filter((v) => v > 0)
    .reduce((sum, v) => sum + v, 0);
  return Math.max(0, usage.machineBusy - ours / (usage.wallSeconds * cores));
}

/** CPU milliseconds per request (or per message) for each process. */
export function cpuPer(usage: CpuUsage, count: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(usage.seconds).map(([name, seconds]) => [
      name,
      count > 0 ? Number(((seconds * 1000) / count).toFixed(2)) : Number.NaN,
    ]),
  );
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

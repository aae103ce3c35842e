// A record of the processes `npm run dev` started, so that processes orphaned by a killed owner
// (kill -9, an OOM kill) are stopped by the next start instead of holding its ports.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SetupError, sleep } from './main';

/** As long as the gentlest of the processes takes to stop. */
const STOP_GRACE_MS = 10_000;

interface Recorded {
  name: string;
  pid: number;
  /** A fragment of its command line, so a recycled pid is never killed. */
  match: string;
}

export class ProcessRecord {
  private readonly processes: Recorded[] = [];

  private constructor(private readonly file: string) {}

  /**
   * Stops what an earlier owner left running, then starts a new record. Refuses while the earlier
   * owner is still alive: it is a second `npm run dev`.
   */
  static async open(file: string, what: string): Promise<ProcessRecord> {
    let earlier: { ownerPid?: unknown; processes?: Recorded[] } | undefined;
    try {
      earlier = JSON.parse(readFileSync(file, 'utf8')) as typeof earlier;
    } catch {
      earlier = undefined;
    }
    if (earlier) {
      const { ownerPid } = earlier;
      if (typeof ownerPid === 'number' && ownerPid !== process.pid && isAlive(ownerPid)) {
        throw new SetupError(`${what} is already running (pid ${ownerPid}); stop it first`);
      }
      // Newest first: the API and worker before the Temporal server they use.
      for (const orphan of [...(earlier.processes ?? [])].reverse()) await stopOrphan(orphan);
    }
    mkdirSync(path.dirname(file), { recursive: true });
    const record = new ProcessRecord(file);
    record.write();
    return record;
  }

  add(name: string, pid: number, match: string): void {
    this.processes.push({ name, pid, match });
    this.write();
  }

  close(): void {
    rmSync(this.file, { force: true });
  }

  private write(): void {
    writeFileSync(this.file, `${JSON.stringify({ ownerPid: process.pid, processes: this.processes }, null, 2)}\n`);
  }
}

async function stopOrphan({ name, pid, match }: Recorded): Promise<void> {
  if (!isAlive(pid) || !commandLine(pid).includes(match)) return;
  console.error(`[dev] stopping ${name} (pid ${pid}), left running by an earlier run`);
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  while (isAlive(pid)) await sleep(50);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped) still answers signal 0; it has no command line.
  return commandLine(pid) !== '' || !isZombie(pid);
}

function isZombie(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

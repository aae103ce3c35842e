import { readFileSync, readdirSync } from 'node:fs';

/**
 * CPU accounting from /proc (Linux): what a process, a set of processes or the machine has used.
 * The bench measures its servers with it; the soak (scripts/soak.ts) counts where its CPU went,
 * killed workers included, with {@link sampleCpuByCommand}.
 */

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU seconds (user + system) a process has used so far; NaN when it is gone. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at ") ".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds of every process whose command line contains `fragment` (e.g. every Postgres backend). */
export function cpuSecondsMatching(fragment: string): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(fragment))
        total += processCpuSeconds(Number(entry)) || 0;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** Busy and total CPU seconds of the whole machine (all cores) so far. */
export function machineCpuSeconds(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((sum, v) => sum + v, 0);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return { busy: (total - idle) / TICKS_PER_SECOND, total: total / TICKS_PER_SECOND };
}

/**
 * Samples every process whose command line matches one of `categories` (the first that matches),
 * every `everyMs`, and keeps each one's last reading: at `stop()` the CPU seconds each category
 * used, processes that ended meanwhile included (up to their last sample). For a soak whose
 * workers are killed and replaced every few seconds, where a snapshot at the end sees none of them.
 */
export function sampleCpuByCommand(
  categories: ReadonlyArray<readonly [name: string, command: RegExp]>,
  everyMs = 1_000,
): { stop(): Record<string, number> } {
  const last = new Map<string, { category: string; seconds: number }>();
  const sample = () => {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
        const category = categories.find(([, pattern]) => pattern.test(command))?.[0];
        if (category === undefined) continue;
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        // pid and start time: a pid the system reuses for a new process is another process.
        last.set(`${entry}@${fields[19]}`, {
          category,
          seconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
        });
      } catch {
        // gone meanwhile
      }
    }
  };
  sample();
  const timer = setInterval(sample, everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
      const totals: Record<string, number> = Object.fromEntries(categories.map(([name]) => [name, 0]));
      for (const { category, seconds } of last.values()) totals[category] = (totals[category] ?? 0) + seconds;
      return totals;
    },
  };
}

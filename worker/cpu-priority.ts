import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * The worker yields the CPU to the webhook door when they share cores. Its work waits durably
 * in Temporal's task queue and can start a few milliseconds later; a webhook's answer cannot
 * (the sender's retry clock runs). On cores of its own (a container, a host of its own) a nice
 * value changes nothing, since no other process competes within its cgroup.
 *
 * Linux keeps a nice value per thread, and a thread inherits its creator's. The worker calls
 * this first thing, before Temporal's runtime starts its threads, and changes every thread that
 * already exists (V8's and libuv's), so the whole process runs at the lower priority.
 */

export interface PriorityChange {
  /** The nice value the process runs at now. */
  nice: number;
  /** Threads changed (0: already at or below that priority, or nothing asked). */
  threads: number;
}

/**
 * Lowers the process's CPU priority to `nice` (0–19), never raises it: a process started under
 * `nice -n 15` stays at 15, and 0 asks for nothing. Throws only on a value out of range; a
 * platform that refuses (or lacks /proc) changes what it can.
 */
export function lowerCpuPriority(nice: number): PriorityChange {
  if (!Number.isInteger(nice) || nice < 0 || nice > 19) throw new RangeError(`nice must be 0–19, got ${nice}`);
  const current = getPriority(0);
  if (nice <= current) return { nice: current, threads: 0 };
  let threads = 0;
  for (const tid of threadIds()) {
    try {
      // On Linux a thread id names one thread; elsewhere only the process itself (0) is listed.
      if (getPriority(tid) < nice) {
        setPriority(tid, nice);
        threads += 1;
      }
    } catch {
      // The thread ended between the listing and the call.
    }
  }
  return { nice: getPriority(0), threads };
}

function threadIds(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number);
  } catch {
    return [0];
  }
}

import type { Logger } from '../lib/logger';

/**
 * What the API needs besides its own port, checked from the start: Postgres (DATABASE_URL) and
 * Temporal (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE). The API starts without them — webhooks wait
 * for Postgres, starts wait for Temporal — so instead of failing it says, once per attempt, what it
 * cannot reach and which variable names it: one warning line per retry (never a stack), with
 * a growing pause between attempts, and a line when it is reached. `/readyz` shows the same.
 */
export interface Dependency {
  /** `postgres` or `temporal`, as in /readyz's checks. */
  name: string;
  /** For people: `Postgres`, `Temporal`. */
  label: string;
  /** The variable(s) an operator fixes, e.g. `DATABASE_URL`. */
  variable: string;
  /** Where it is looked for, without credentials, e.g. `127.0.0.1:5432/replyonce`. */
  target: string;
  /** Resolves once it answers; rejects with what is wrong (a sentence). */
  probe: () => Promise<void>;
}

export type DependencyState = 'checking' | 'ok' | 'unreachable';

export interface StartupChecksOptions {
  /** The first pause after a failed attempt; doubled each time up to `maxDelayMs`. */
  initialDelayMs?: number;
  maxDelayMs?: number;
}

export class StartupChecks {
  private readonly states = new Map<string, { state: DependencyState; problem: string | null }>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(
    private readonly logger: Logger,
    private readonly dependencies: Dependency[],
    private readonly options: StartupChecksOptions = {},
  ) {
    for (const dependency of dependencies) this.states.set(dependency.name, { state: 'checking', problem: null });
  }

  /** Starts checking every dependency until each has answered once. */
  start(): void {
    for (const dependency of this.dependencies) void this.check(dependency, 1, this.options.initialDelayMs ?? 1_000);
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  state(name: string): DependencyState {
    return this.states.get(name)?.state ?? 'ok';
  }

  /** Why the dependency was not reached at its last attempt (naming its variable), or null. */
  problem(name: string): string | null {
    const state = this.states.get(name);
    return state?.state === 'unreachable' ? state.problem : null;
  }

  private async check(dependency: Dependency, attempt: number, delayMs: number): Promise<void> {
    if (this.stopped) return;
    try {
      await dependency.probe();
      const before = this.states.get(dependency.name);
      this.states.set(dependency.name, { state: 'ok', problem: null });
      if (before?.state === 'unreachable') {
        this.logger.info(
          { dependency: dependency.name, variable: dependency.variable, attempts: attempt },
          `${dependency.label} reached at ${dependency.target} (${dependency.variable})`,
        );
      }
      return;
    } catch (error) {
      if (this.stopped) return;
      const reason = error instanceof Error ? error.message : String(error);
      const problem = `cannot reach ${dependency.label} at ${dependency.target} (${dependency.variable}): ${reason}`;
      this.states.set(dependency.name, { state: 'unreachable', problem });
      this.logger.warn(
        { dependency: dependency.name, variable: dependency.variable, attempt, retryInMs: delayMs },
        `${problem}; retrying in ${formatDelay(delayMs)}`,
      );
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.check(dependency, attempt + 1, Math.min(delayMs * 2, this.options.maxDelayMs ?? 30_000));
    }, delayMs);
    timer.unref();
    this.timers.add(timer);
  }
}

function formatDelay(ms: number): string {
  return ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`;
}

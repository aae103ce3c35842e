import { loadTemporalConnection, type TemporalConnectionSettings } from '../../lib/temporal-connection';

/**
 * The suite's shared services, started once by scripts/test.ts (`npm test`) and handed to
 * every test file through the environment.
 */
function required(name: string): string {
  const value = process.env[name];
  if (!value)
    throw new Error(
      `${name} is not set: run the tests with \`npm test\`, which starts Temporal and Postgres for the suite`,
    );
  return value;
}

export const testEnv = {
  get temporalAddress() {
    return required('TEMPORAL_ADDRESS');
  },
  get namespace() {
    return required('TEMPORAL_NAMESPACE');
  },
  /**
   * The connection, read through Temporal's environment configuration like the processes read it:
   * plaintext for the dev server, mTLS when a file (the production-topology group) points at the stack.
   */
  get temporal(): TemporalConnectionSettings {
    const loaded = loadTemporalConnection({ ...process.env, TEMPORAL_ADDRESS: this.temporalAddress });
    if (!loaded.ok) throw new Error(`the suite's Temporal connection is invalid:\n${loaded.problems.join('\n')}`);
    return loaded.settings;
  },
  /** Temporal's connection variables as set for the suite, for the app processes a test spawns. */
  get temporalVars(): Record<string, string> {
    return Object.fromEntries(
      Object.entries(process.env).filter(
        (entry): entry is [string, string] =>
          /^TEMPORAL_(ADDRESS|NAMESPACE|API_KEY|TLS.*|PROFILE|CONFIG_FILE)$/.test(entry[0]) && entry[1] !== undefined,
      ),
    );
  },
  get databaseUrl() {
    return required('DATABASE_URL');
  },
  get workflowBundle() {
    return process.env.REPLYONCE_WORKFLOW_BUNDLE;
  },
};

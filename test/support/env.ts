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
  get databaseUrl() {
    return required('DATABASE_URL');
  },
  get workflowBundle() {
    return process.env.REPLYONCE_WORKFLOW_BUNDLE;
  },
};

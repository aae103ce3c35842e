// Prepares a Temporal namespace for replyonce (the work is in scripts/services/temporal-setup.ts):
// its retention and the workflows' search attributes. Idempotent; starts no server.
//
//   npm run temporal:setup [-- --check]   (--check: create nothing, only check)
//                                 Temporal's connection variables: TEMPORAL_ADDRESS (localhost:7233),
//                                 TEMPORAL_NAMESPACE (replyonce), TEMPORAL_TLS_*, TEMPORAL_API_KEY, TEMPORAL_PROFILE
import { ConfigError, loadTemporalConfig } from '../lib/config';
import { describeTemporal } from '../lib/temporal-connection';
import { SetupError, runMain } from './services/main';
import { setupTemporal } from './services/temporal-setup';

runMain(async () => {
  let config;
  try {
    config = loadTemporalConfig();
  } catch (error) {
    if (error instanceof ConfigError) throw new SetupError(error.message);
    throw error;
  }
  const outcome = await setupTemporal({
    connection: config.temporal,
    namespace: config.TEMPORAL_NAMESPACE,
    checkOnly: process.argv.includes('--check'),
  });
  console.error(
    `[temporal] namespace ${config.TEMPORAL_NAMESPACE} on ${describeTemporal(config.temporal)} is ready${outcome === 'checked' ? ' (checked, nothing created)' : ''}`,
  );
});

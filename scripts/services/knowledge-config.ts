import { ConfigError, loadKnowledgeConfig, type KnowledgeConfig } from '../../lib/config';
import { SetupError } from './main';
import { DEFAULT_DEV_DATABASE_URL } from './postgres';

/**
 * The knowledge scripts' configuration (`npm run knowledge:sync`, `npm run eval`): from the
 * environment, with `--dev` meaning `npm run dev`'s database when DATABASE_URL is unset. A bad
 * variable ends the script with its name and what to put there.
 */
export function knowledgeConfigFor(options: { dev: boolean }): KnowledgeConfig {
  const env = { ...process.env };
  if (options.dev) env.DATABASE_URL ||= DEFAULT_DEV_DATABASE_URL;
  try {
    return loadKnowledgeConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) throw new SetupError(error.message);
    throw error;
  }
}

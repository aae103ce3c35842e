import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SetupError } from './main';
import { DEFAULT_DEV_DATABASE_URL } from './postgres';

/** Where `npm run dev` keeps its secrets (scripts/services/dev-secrets.ts writes it). */
const DEV_SECRETS = path.resolve(__dirname, '..', '..', '.data', 'dev-secrets.json');
/** scripts/dev.ts's sandbox port. */
const DEV_SANDBOX_URL = 'http://127.0.0.1:4010';

/**
 * `--dev` of the operator commands that read AgentMail and Postgres (`npm run replay`,
 * `npm run rehearse`): the `npm run dev` stack's settings, for whichever of them the environment
 * leaves unset. The sandbox's key is the dev stack's own, read from its secrets file, never printed.
 */
export function devStackEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (!existsSync(DEV_SECRETS))
    throw new SetupError(`--dev: ${DEV_SECRETS} does not exist; start the dev stack once with \`npm run dev\``);
  const secrets = JSON.parse(readFileSync(DEV_SECRETS, 'utf8')) as { agentmailApiKey?: string };
  const usesSandbox = !env.AGENTMAIL_API_KEY;
  return {
    ...env,
    DATABASE_URL: env.DATABASE_URL || DEFAULT_DEV_DATABASE_URL,
    ...(usesSandbox
      ? { AGENTMAIL_API_KEY: secrets.agentmailApiKey, AGENTMAIL_BASE_URL: env.AGENTMAIL_BASE_URL || DEV_SANDBOX_URL }
      : {}),
  };
}

// Secrets for local development, generated once and kept in .data/dev-secrets.json (git-ignored),
// so the webhook secret the sandbox signs with stays the same across `npm run dev` runs.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface DevSecrets {
  /** Svix-style signing secret shared by the sandbox (signs) and the API (verifies). */
  agentmailWebhookSecret: string;
  /** The key the API and worker present to the sandbox. */
  agentmailApiKey: string;
  /** ZENDESK_MARKER_SECRET, for a worker pointed at a help desk (TICKET_PROVIDER=zendesk). */
  zendeskMarkerSecret: string;
}

export function loadDevSecrets(file: string): DevSecrets {
  const stored: Partial<DevSecrets> = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as Partial<DevSecrets>)
    : {};
  const secrets: DevSecrets = {
    agentmailWebhookSecret: stored.agentmailWebhookSecret ?? `whsec_${randomBytes(32).toString('base64')}`,
    agentmailApiKey: stored.agentmailApiKey ?? `am_local_${randomBytes(16).toString('hex')}`,
    zendeskMarkerSecret: stored.zendeskMarkerSecret ?? randomBytes(32).toString('hex'),
  };
  if (
    secrets.agentmailWebhookSecret !== stored.agentmailWebhookSecret ||
    secrets.agentmailApiKey !== stored.agentmailApiKey ||
    secrets.zendeskMarkerSecret !== stored.zendeskMarkerSecret
  ) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
  }
  return secrets;
}

import { AgentMailClient } from 'agentmail';

export interface AgentMailSettings {
  apiKey: string;
  /** Unset: AgentMail's production API. */
  baseUrl?: string | undefined;
  timeoutSeconds?: number;
}

/**
 * The SDK's own retries are switched off: Temporal's activity retry policy is the one retry
 * layer, so every attempt is visible in the Web UI and carries the same operation key.
 */
export function createAgentMailClient(settings: AgentMailSettings): AgentMailClient {
  return new AgentMailClient({
    apiKey: settings.apiKey,
    ...(settings.baseUrl ? { baseUrl: settings.baseUrl } : {}),
    maxRetries: 0,
    timeoutInSeconds: settings.timeoutSeconds ?? 30,
  });
}

export type { AgentMailClient };

import type { Db } from '../../lib/db';
import type { WorkerConfig } from '../../lib/config';
import { PostgresTickets } from './postgres-tickets';
import type { TicketProvider } from './ticket-provider';
import { ZendeskTickets } from './zendesk-tickets';

export type TicketConfig = Pick<
  WorkerConfig,
  | 'TICKET_PROVIDER'
  | 'ZENDESK_URL'
  | 'ZENDESK_EMAIL'
  | 'ZENDESK_API_TOKEN'
  | 'ZENDESK_TIMEOUT_MS'
  | 'ZENDESK_MARKER_SECRET'
>;

/** Tickets in our own Postgres by default; in Zendesk when TICKET_PROVIDER=zendesk (its settings checked at start-up). */
export function createTicketProvider(config: TicketConfig, db: Db): TicketProvider {
  if (config.TICKET_PROVIDER === 'postgres') return new PostgresTickets(db);
  const { ZENDESK_URL: url, ZENDESK_EMAIL: email, ZENDESK_API_TOKEN: apiToken } = config;
  const markerSecret = config.ZENDESK_MARKER_SECRET;
  if (!url || !email || !apiToken || !markerSecret)
    throw new Error(
      'TICKET_PROVIDER=zendesk needs ZENDESK_URL, ZENDESK_EMAIL, ZENDESK_API_TOKEN and ZENDESK_MARKER_SECRET',
    );
  return new ZendeskTickets({ url, email, apiToken, markerSecret, timeoutMs: config.ZENDESK_TIMEOUT_MS });
}

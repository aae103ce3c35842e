import type { Db } from '../../lib/db';
import type { WorkerConfig } from '../../lib/config';
import { PostgresTickets } from './postgres-tickets';
import type { TicketProvider } from './ticket-provider';
import { ZendeskTickets } from './zendesk-tickets';

export type TicketConfig = Pick<
  WorkerConfig,
  'TICKET_PROVIDER' | 'ZENDESK_URL' | 'ZENDESK_EMAIL' | 'ZENDESK_API_TOKEN' | 'ZENDESK_TIMEOUT_MS'
>;

/** Tickets in our own Postgres by default; in Zendesk when TICKET_PROVIDER=zendesk (its settings checked at start-up). */
export function createTicketProvider(config: TicketConfig, db: Db): TicketProvider {
  if (config.TICKET_PROVIDER === 'postgres') return new PostgresTickets(db);
  const { ZENDESK_URL: url, ZENDESK_EMAIL: email, ZENDESK_API_TOKEN: apiToken } = config;
  if (!url || !email || !apiToken)
    throw new Error('TICKET_PROVIDER=zendesk needs ZENDESK_URL, ZENDESK_EMAIL and ZENDESK_API_TOKEN');
  return new ZendeskTickets({ url, email, apiToken, timeoutMs: config.ZENDESK_TIMEOUT_MS });
}

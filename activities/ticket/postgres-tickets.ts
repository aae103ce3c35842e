import type { Db } from '../../lib/db';
import { sha256Hex } from '../../lib/hashing';
import type { TicketProvider, TicketRequest } from './ticket-provider';

/** The default provider: tickets in the project's own Postgres, keyed by the operation key. */
export class PostgresTickets implements TicketProvider {
  readonly name = 'postgres';

  constructor(private readonly db: Db) {}

  /** Idempotent by itself (one upsert on the operation key), so a resumed attempt needs no look-up. */
  async create(request: TicketRequest): Promise<{ ticketId: string }> {
    // Derived from the external id, so a repeated create names the same ticket.
    const ticketId = `T-${sha256Hex(request.externalId).slice(0, 12)}`;
    const created = await this.db.query<{ ticket_id: string }>(
      `INSERT INTO tickets (ticket_id, operation_key, inbox_id, message_id, thread_id, subject, note)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (operation_key) DO UPDATE SET operation_key = EXCLUDED.operation_key
       RETURNING ticket_id`,
      [
        ticketId,
        request.externalId,
        request.inboxId,
        request.messageId,
        request.threadId,
        request.subject,
        request.note,
      ],
    );
    return { ticketId: created.rows[0]!.ticket_id };
  }
}

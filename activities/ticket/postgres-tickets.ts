import type { Db } from '../../lib/db';
import { sha256Hex } from '../../lib/hashing';
import type { CommentRequest, TicketProvider, TicketRequest } from './ticket-provider';

/** The default provider: tickets in the project's own Postgres, keyed by the operation key. */
export class PostgresTickets implements TicketProvider {
  readonly name = 'postgres';
  /** Each create and comment is one upsert on its key, beside the operation store (ticket-provider.ts). */
  readonly keyedInStore = true;

  constructor(private readonly db: Db) {}

  /** Idempotent by itself (one insert on the operation key, or the row a racing create made): a resumed attempt needs no look-up. */
  async create(request: TicketRequest): Promise<{ ticketId: string }> {
    // Derived from the external id, so a repeated create names the same ticket.
    const ticketId = `T-${sha256Hex(request.externalId).slice(0, 12)}`;
    // No conflict target: the key and the id are both unique, and two first messages of a thread
    // racing can meet on either index first (a target names one; the other then raised 23505). The
    // look-up is a statement of its own, so it sees the row the other one committed.
    const inserted = await this.db.query<{ ticket_id: string }>(
      `INSERT INTO tickets (ticket_id, operation_key, inbox_id, message_id, thread_id, subject, note)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT DO NOTHING
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
    const created =
      inserted.rows.length > 0
        ? inserted
        : await this.db.query<{ ticket_id: string }>(`SELECT ticket_id FROM tickets WHERE operation_key = $1`, [
            request.externalId,
          ]);
    return { ticketId: created.rows[0]!.ticket_id };
  }

  /**
   * Idempotent by itself: the comment's key is its primary key. A customer's message reopens a
   * ticket a person closed, in the same transaction, so a ticket is never left closed under a
   * question nobody saw.
   */
  async addComment(request: CommentRequest): Promise<{ commentId: string; added: boolean }> {
    const done = await this.db.query<{ added: boolean }>(
      `WITH added AS (
         INSERT INTO ticket_comments (comment_key, ticket_id, kind, public, message_id, note)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (comment_key) DO NOTHING
         RETURNING ticket_id
       ), reopened AS (
         UPDATE tickets SET status = 'open'
          WHERE $7 AND status <> 'open' AND ticket_id IN (SELECT ticket_id FROM added)
       )
       SELECT EXISTS (SELECT 1 FROM added) AS added`,
      [
        request.externalId,
        request.ticketId,
        request.kind,
        request.public,
        request.messageId,
        // A note whole; a reply's header only (which message went out, the articles it cites): its
        // text lives in the operation store and at AgentMail.
        request.kind === 'note' ? request.body : request.kind === 'reply' ? request.body.split('\n\n')[0]! : null,
        request.reopen,
      ],
    );
    return { commentId: `C-${sha256Hex(request.externalId).slice(0, 12)}`, added: done.rows[0]!.added };
  }
}

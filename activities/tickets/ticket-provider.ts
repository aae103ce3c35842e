/**
 * The ticket provider interface. `create` must be idempotent on `externalId` (our operation
 * key): a crash after the remote create is recovered by the same call finding the ticket,
 * never by creating another.
 */

export interface TicketRequest {
  externalId: string;
  inboxId: string;
  messageId: string;
  threadId: string;
  subject: string;
  note: string;
}

export interface TicketProvider {
  readonly name: string;
  create(request: TicketRequest): Promise<{ ticketId: string }>;
}

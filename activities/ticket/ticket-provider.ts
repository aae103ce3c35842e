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
  /** The inbound message, for help desks that show it to agents (Postgres keeps ids only). */
  message: { from: string; text: string; receivedAt: string };
}

export interface TicketAttempt {
  /**
   * An earlier attempt claimed this ticket's operation and its outcome is unknown (it may have
   * created the ticket and crashed, or lost the response): look for it before creating.
   */
  resumed: boolean;
  /** The activity's cancellation. */
  signal?: AbortSignal | undefined;
}

export interface TicketProvider {
  readonly name: string;
  create(request: TicketRequest, attempt: TicketAttempt): Promise<{ ticketId: string }>;
}

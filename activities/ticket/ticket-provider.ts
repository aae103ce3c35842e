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
  /**
   * The inbound message, for help desks that show it to agents (Postgres keeps ids only). Absent
   * on a thread's ticket: its messages follow as comments, and the ticket's own fields stay the
   * same whichever message of the thread opens it.
   */
  message?: { from: string; text: string; receivedAt: string };
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

/**
 * One comment on a thread's ticket: an inbound message (public, from the customer), our reply
 * (public) or a skipped message's reason (an internal note). `externalId` is its operation key:
 * `addComment` must add it at most once, also when an earlier attempt's outcome is unknown.
 */
export interface CommentRequest {
  externalId: string;
  ticketId: string;
  kind: 'inbound' | 'reply' | 'note';
  messageId: string;
  public: boolean;
  body: string;
  /** A new customer message reopens a ticket a person closed (or solved). */
  reopen: boolean;
}

export interface TicketProvider {
  readonly name: string;
  /**
   * True when `create` and `addComment` are exactly-once by themselves, in the operation store's own
   * database: each is one statement keyed by `externalId` (the operation key), so a retry, a
   * concurrent attempt or a crash at any point can neither repeat the effect nor lose its record.
   * The thread's ticket and the comments of such a provider then need no operation row of their
   * own (its claim and completion would be two more round trips a step, guarding nothing); a help
   * desk across the network keeps them (activities/ticket/open-ticket.ts).
   */
  readonly keyedInStore?: boolean;
  create(request: TicketRequest, attempt: TicketAttempt): Promise<{ ticketId: string }>;
  /** `added`: false when the comment was there already (a retry's); providers that cannot tell omit it. */
  addComment(request: CommentRequest, attempt: TicketAttempt): Promise<{ commentId: string; added?: boolean }>;
}

import type { Db } from '../lib/db';

/**
 * The webhook-delivery dedupe table. A row is written only after Temporal acknowledged the
 * start, so "known event" always means "already handed to a workflow".
 */

export type EventOutcome = 'queued' | 'duplicate' | 'ignored';

export interface InboundEventRecord {
  eventId: string;
  eventType: string;
  inboxId?: string;
  messageId?: string;
  workflowId?: string;
  outcome: EventOutcome;
}

export class InboundEvents {
  constructor(private readonly db: Db) {}

  async isKnown(eventId: string): Promise<boolean> {
    const found = await this.db.query('SELECT 1 FROM inbound_events WHERE event_id = $1', [eventId]);
    return (found.rowCount ?? 0) > 0;
  }

  /** First record wins: a concurrent duplicate of the same event leaves the original row as it was. */
  async record(event: InboundEventRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO inbound_events (event_id, event_type, inbox_id, message_id, workflow_id, outcome)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (event_id) DO NOTHING`,
      [event.eventId, event.eventType, event.inboxId ?? null, event.messageId ?? null, event.workflowId ?? null, event.outcome],
    );
  }
}

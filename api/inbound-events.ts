import { LRUCache } from 'lru-cache';
import type { Db } from '../lib/db';
import { advanceCursorSql } from './catch-up/inbox-cursors';

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
  /**
   * The message's own time (the payload's `message.timestamp`), for an accepted message.received:
   * the inbox's catch-up cursor moves to it in the same statement.
   */
  messageAt?: Date | undefined;
}

/**
 * Event ids this process has seen recorded, so a retry storm (a sender replaying its backlog after
 * an outage, Svix retrying a slow answer) is answered from memory instead of one lookup each.
 * Only ids known to be in the table are kept, and rows live 7 days (retention) against the
 * cache's hour, so a hit is always a true duplicate; a miss falls through to the table, which
 * stays the authority (other replicas, restarts).
 */
const KNOWN_EVENTS = { max: 50_000, ttl: 60 * 60_000 };

export class InboundEvents {
  private readonly known = new LRUCache<string, true>(KNOWN_EVENTS);

  constructor(private readonly db: Db) {}

  async isKnown(eventId: string): Promise<boolean> {
    if (this.known.has(eventId)) return true;
    const found = await this.db.query('SELECT 1 FROM inbound_events WHERE event_id = $1', [eventId]);
    if ((found.rowCount ?? 0) === 0) return false;
    this.known.set(eventId, true);
    return true;
  }

  /**
   * First record wins, with one exception: concurrent copies of one event race, and a copy that
   * found the workflow already started ("duplicate") may land before the copy that started it
   * ("queued"). The queued record then replaces it, so the event shows what really happened.
   */
  async record(event: InboundEventRecord): Promise<void> {
    const insert = `INSERT INTO inbound_events (event_id, event_type, inbox_id, message_id, workflow_id, outcome)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (event_id) DO UPDATE SET outcome = 'queued', workflow_id = EXCLUDED.workflow_id
         WHERE EXCLUDED.outcome = 'queued' AND inbound_events.outcome = 'duplicate'`;
    const values = [
      event.eventId,
      event.eventType,
      event.inboxId ?? null,
      event.messageId ?? null,
      event.workflowId ?? null,
      event.outcome,
    ];
    if (event.inboxId === undefined || event.messageAt === undefined) {
      await this.db.query(insert, values);
    } else {
      // One statement, one round trip: the event row and the inbox's cursor together.
      await this.db.query(`WITH event AS (${insert}) ${advanceCursorSql('$3', '$7')}`, [...values, event.messageAt]);
    }
    this.known.set(event.eventId, true);
  }
}

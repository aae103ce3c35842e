import express, { type Express } from 'express';
import type { Pool } from 'pg';
import { Webhook } from 'svix';

/**
 * The reference: the webhook handler people write by hand, kept as lean as its authors would.
 * Verify the Svix signature over the raw body, insert the event (its id is the dedupe key,
 * its payload the work item a job picks up later), answer 204. Duplicates hit the primary
 * key and are ignored in the same statement.
 */

export const BASELINE_TABLE = 'baseline_webhook_events';

export const baselineSchemaSql = `CREATE TABLE IF NOT EXISTS ${BASELINE_TABLE} (
  event_id    text PRIMARY KEY,
  event_type  text NOT NULL,
  payload     jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
)`;

const insertEvent = `INSERT INTO ${BASELINE_TABLE} (event_id, event_type, payload) VALUES ($1, $2, $3)
  ON CONFLICT (event_id) DO NOTHING`;

export function createBaselineApp(options: { pool: Pool; webhookSecret: string }): Express {
  const webhook = new Webhook(options.webhookSecret);
  const app = express();
  app.disable('x-powered-by');

  app.post('/webhooks/agentmail', express.raw({ type: '*/*', limit: '1mb' }), async (request, response) => {
    let event: { event_id: string; event_type: string };
    try {
      webhook.verify(request.body as Buffer, request.headers as Record<string, string>);
      event = JSON.parse((request.body as Buffer).toString('utf8')) as typeof event;
    } catch {
      response.status(400).end();
      return;
    }
    await options.pool.query(insertEvent, [
      event.event_id,
      event.event_type,
      (request.body as Buffer).toString('utf8'),
    ]);
    response.status(204).end();
  });

  return app;
}

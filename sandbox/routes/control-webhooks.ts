import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { parseBody } from '../schemas';
import type { SandboxState } from '../state';

/** Control of webhook delivery: the endpoint, the events, and every attempt made. */
export function controlWebhookRoutes(app: FastifyInstance, state: SandboxState): void {
  const { webhooks } = state;

  app.get('/_sandbox/webhook', async () => webhooks.endpoint);
  app.post('/_sandbox/webhook', async (request) => {
    const body = parseBody(
      z.object({ url: z.url().nullable().optional(), enabled: z.boolean().optional() }),
      request.body,
    );
    return webhooks.configure(body);
  });

  /** Another webhook of the organisation (not the sandbox's own; nothing is delivered to it). */
  app.post('/_sandbox/webhooks/others', async (request) => {
    const body = parseBody(
      z.object({
        webhook_id: z.string().min(1),
        url: z.url(),
        enabled: z.boolean().default(true),
        event_types: z.array(z.string()).optional(),
      }),
      request.body,
    );
    const now = new Date().toISOString();
    const webhook = { ...body, secret: 'whsec_not_ours', created_at: now, updated_at: now };
    const at = state.otherWebhooks.findIndex((w) => w.webhook_id === body.webhook_id);
    if (at === -1) state.otherWebhooks.push(webhook);
    else state.otherWebhooks[at] = webhook;
    return webhook;
  });

  app.get('/_sandbox/events', async () => ({
    events: webhooks.listEvents().map(({ body: _body, ...event }) => event),
  }));
  app.get<{ Params: { event_id: string } }>('/_sandbox/events/:event_id', async (request) => {
    const { chains: _chains, body, ...event } = webhooks.event(request.params.event_id);
    return { ...event, payload: JSON.parse(body) as unknown };
  });

  app.get<{ Querystring: { event_id?: string } }>('/_sandbox/deliveries', async (request) => {
    const { event_id } = request.query;
    const attempts = webhooks.attempts.filter((a) => !event_id || a.event_id === event_id);
    return { count: attempts.length, attempts };
  });

  /** One attempt now with the same svix-id; answers once the receiver has. */
  app.post<{ Params: { event_id: string } }>('/_sandbox/events/:event_id/redeliver', async (request) =>
    webhooks.redeliver(request.params.event_id),
  );

  /** The same message as a brand-new event (new event_id, new svix-id), delivered on schedule. */
  app.post<{ Params: { event_id: string } }>('/_sandbox/events/:event_id/resend-as-new', async (request) => {
    const event = webhooks.resendAsNew(request.params.event_id);
    return { event_id: event.event_id, svix_id: event.svix_id };
  });
}

import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors';
import { listResponse, pageOf } from '../paging';
import { parseBody, updateWebhookSchema } from '../schemas';
import type { SandboxState } from '../state';
import type { WebhookRaw } from '../wire';
import type { ListQuery } from './list-query';

/** Inboxes and the one webhook endpoint, read-mostly: enough for health checks and a watchdog. */
export function resourceRoutes(app: FastifyInstance, state: SandboxState): void {
  const { mailbox, webhooks } = state;

  // inboxes.list: paged like every AgentMail list (limit, page_token), newest first unless ascending.
  app.get<{ Querystring: Pick<ListQuery, 'limit' | 'page_token' | 'ascending'> }>('/v0/inboxes', async (request) => {
    const ascending = request.query.ascending === 'true';
    const inboxes = mailbox.listInboxes();
    const page = pageOf(inboxes, request.query, ascending);
    return listResponse('inboxes', page);
  });

  app.get<{ Params: { inbox_id: string } }>('/v0/inboxes/:inbox_id', async (request) =>
    mailbox.inbox(request.params.inbox_id),
  );

  const current = (): WebhookRaw | undefined => {
    const { webhook_id, url, enabled, event_types, inbox_ids, created_at, updated_at } = webhooks.endpoint;
    if (url === null) return undefined;
    const filters = { ...(event_types ? { event_types } : {}), ...(inbox_ids ? { inbox_ids } : {}) };
    return { webhook_id, url, enabled, secret: webhooks.secret, created_at, updated_at, ...filters };
  };
  const byId = (id: string): WebhookRaw => {
    const webhook = current();
    if (webhook?.webhook_id === id) return webhook;
    const other = state.otherWebhooks.find((w) => w.webhook_id === id);
    if (!other) throw ApiError.notFound('Webhook');
    return other;
  };

  app.get('/v0/webhooks', async () => {
    const webhook = current();
    const all = [...(webhook ? [webhook] : []), ...state.otherWebhooks];
    return { count: all.length, webhooks: all };
  });

  app.get<{ Params: { webhook_id: string } }>('/v0/webhooks/:webhook_id', async (request) =>
    byId(request.params.webhook_id),
  );

  app.patch<{ Params: { webhook_id: string } }>('/v0/webhooks/:webhook_id', async (request) => {
    const existing = byId(request.params.webhook_id);
    const body = parseBody(updateWebhookSchema, request.body);
    const other = state.otherWebhooks.find((w) => w.webhook_id === existing.webhook_id);
    if (other) {
      if (body.enabled !== undefined && body.enabled !== null) other.enabled = body.enabled;
      if (body.event_types) other.event_types = body.event_types;
      other.updated_at = new Date().toISOString();
      return other;
    }
    const remove = body.remove_inbox_ids ?? [];
    const added = [...new Set([...(existing.inbox_ids ?? []), ...(body.add_inbox_ids ?? [])])];
    const inboxIds = body.add_inbox_ids || body.remove_inbox_ids ? added.filter((i) => !remove.includes(i)) : undefined;
    webhooks.configure({
      event_types: body.event_types ?? undefined,
      inbox_ids: inboxIds,
      enabled: body.enabled ?? undefined,
    });
    return byId(request.params.webhook_id);
  });
}

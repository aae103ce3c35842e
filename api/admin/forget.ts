import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { erase, receiptOf, type ErasureDeps } from '../../privacy/erase';

export interface ForgetRouteOptions {
  /** Checked by the admin plugin this is registered inside (api/admin/route.ts): ADMIN_TOKEN. */
  erasure: ErasureDeps;
}

const forgetBody = z.object({
  address: z.string().min(3).max(320),
  inboxes: z.array(z.string().min(1)).min(1).max(100).optional(),
  dry_run: z.boolean().optional(),
  block: z.boolean().optional(),
  /** A new request after an earlier erasure of the same mailbox finished (`npm run forget -- --again`). */
  again: z.boolean().optional(),
  /** Who asked, for the receipt (the operator's name or ticket). */
  requested_by: z.string().min(1).max(200).optional(),
});

/**
 * POST /admin/forget {"address": "...", "inboxes"?: [...], "dry_run"?: true, "block"?: true,
 * "requested_by"?: "..."}: `npm run forget` over HTTP, answered with the receipt (docs/privacy.md).
 * GET /admin/forget/:erasure_id: a stored receipt. Receipts hold ids, counts and hashes only; the
 * address is never logged.
 */
export const forgetRoutes: FastifyPluginAsync<ForgetRouteOptions> = async (app, options) => {
  app.post('/admin/forget', async (request, reply) => {
    const body = forgetBody.safeParse(request.body);
    if (!body.success)
      return reply.code(400).send({
        error: 'bad_request',
        message: body.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; '),
      });
    const outcome = await erase(options.erasure, {
      address: body.data.address,
      inboxes: body.data.inboxes,
      dryRun: body.data.dry_run,
      block: body.data.block,
      again: body.data.again,
      requestedBy: body.data.requested_by ?? 'admin-api',
    }).catch((error: unknown) => {
      if (error instanceof Error && error.message.startsWith('--address')) return { invalid: error.message };
      throw error;
    });
    if ('invalid' in outcome) return reply.code(400).send({ error: 'bad_request', message: outcome.invalid });
    request.log.info(
      { erasureId: outcome.receipt.erasureId, repeated: outcome.repeated, dryRun: outcome.dryRun },
      'erasure',
    );
    return reply.send(outcome);
  });

  app.get<{ Params: { erasure_id: string } }>('/admin/forget/:erasure_id', async (request, reply) => {
    const receipt = await receiptOf(options.erasure.db, request.params.erasure_id);
    if (!receipt) return reply.code(404).send({ error: 'not_found', message: 'no finished erasure with that id' });
    return reply.send({ receipt });
  });
};

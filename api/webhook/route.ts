import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { failpoint } from '../../lib/failpoints';
import * as metrics from '../../lib/metrics';
import { type InboundEvents } from '../inbound-events';
import { startInboundWorkflow } from '../start-inbound-workflow';
import { describeIssues, eventEnvelope, messageReceivedEvent } from './payload';
import { createSignatureVerifier } from './verify-signature';

export interface WebhookRouteOptions {
  webhookSecret: string;
  temporal: Client;
  taskQueue: string;
  events: InboundEvents;
  /** Time allowed for Postgres and Temporal before answering 500, well inside AgentMail's 15 s. */
  deadlineMs: number;
  bodyLimitBytes: number;
}

/**
 * POST /webhooks/agentmail. The order matters:
 * 1 verify the signature over the raw bytes (400, nothing recorded);
 * 2 a known event_id answers 204 at once (one indexed lookup, no Temporal call);
 * 3 start the message's workflow (its ID dedupes the job, whatever the event id);
 * 4 record the event only after Temporal acknowledged the start, so a failed start is never
 *   mistaken for a duplicate when the sender retries;
 * 5 answer 204, duplicates too. Postgres or Temporal failing → 500: the sender's retry recovers.
 */
export const webhookRoute: FastifyPluginAsync<WebhookRouteOptions> = async (app: FastifyInstance, options) => {
  const verify = createSignatureVerifier(options.webhookSecret);

  // Each answer is counted by outcome with its latency; 4xx and 5xx are classed by status.
  const outcomes = new WeakMap<FastifyRequest, metrics.WebhookOutcome>();
  const settle = (request: FastifyRequest, outcome: metrics.WebhookOutcome) => outcomes.set(request, outcome);
  app.addHook('onResponse', async (request, reply) => {
    const outcome =
      outcomes.get(request) ?? (reply.statusCode >= 500 ? 'error' : reply.statusCode >= 400 ? 'invalid' : 'queued');
    metrics.webhooks.inc({ outcome });
    metrics.webhookAckSeconds.observe({ outcome }, reply.elapsedTime / 1000);
  });

  // Inside this plugin only (Fastify encapsulation): keep the exact bytes for the signature.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimitBytes }, (_request, body, done) =>
    done(null, body),
  );

  app.post('/webhooks/agentmail', { bodyLimit: options.bodyLimitBytes }, async (request, reply) => {
    const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const signature = verify(rawBody, request.headers);
    if (signature.verdict === 'invalid') {
      request.log.warn(
        { reason: signature.reason, svixId: request.headers['svix-id'] },
        'webhook rejected: bad signature',
      );
      return reply
        .code(400)
        .send({ error: 'invalid_signature', message: `Webhook signature verification failed: ${signature.reason}` });
    }
    if (signature.verdict === 'valid-not-json') {
      request.log.warn({ svixId: request.headers['svix-id'] }, 'webhook rejected: signed body is not JSON');
      return reply.code(422).send({ error: 'invalid_payload', message: 'The signed body is not valid JSON.' });
    }
    const json = signature.payload;
    const envelope = eventEnvelope.safeParse(json);
    if (!envelope.success) {
      request.log.warn({ issues: describeIssues(envelope.error) }, 'webhook rejected: no event envelope');
      return reply
        .code(422)
        .send({ error: 'invalid_payload', message: `Not an AgentMail event: ${describeIssues(envelope.error)}` });
    }
    const { event_id: eventId, event_type: eventType } = envelope.data;
    const deadline = new Date(Date.now() + options.deadlineMs);

    if (await options.events.isKnown(eventId)) {
      settle(request, 'duplicate');
      request.log.info({ eventId, outcome: 'duplicate' }, 'webhook duplicate event');
      return reply.code(204).send();
    }

    if (eventType !== 'message.received') {
      await options.events.record({ eventId, eventType, outcome: 'ignored' });
      settle(request, 'ignored');
      request.log.info({ eventId, eventType, outcome: 'ignored' }, 'webhook event type not handled');
      return reply.code(204).send();
    }

    const event = messageReceivedEvent.safeParse(json);
    if (!event.success) {
      request.log.warn(
        { eventId, issues: describeIssues(event.error) },
        'webhook rejected: malformed message.received',
      );
      return reply.code(422).send({
        error: 'invalid_payload',
        message: `Malformed message.received event: ${describeIssues(event.error)}`,
      });
    }
    const { inbox_id: inboxId, message_id: messageId, thread_id: threadId, timestamp } = event.data.message;
    const start = await startInboundWorkflow(
      options.temporal,
      { taskQueue: options.taskQueue, deadline },
      { inboxId, messageId, threadId, eventId },
    );
    failpoint('ingress.after-start');
    const outcome = start.started ? 'queued' : 'duplicate';
    await options.events.record({
      eventId,
      eventType,
      inboxId,
      messageId,
      workflowId: start.workflowId,
      outcome,
      messageAt: timestamp,
    });
    settle(request, outcome);
    request.log.info({ eventId, workflowId: start.workflowId, outcome }, `webhook ${outcome}`);
    return reply.code(204).send();
  });
};

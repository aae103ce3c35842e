import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Intake } from '../../intake/intake';
import { clampMessageTime } from '../../intake/message-time';
import * as metrics from '../../lib/metrics';
import { describeIssues, eventEnvelope, messageReceivedEvent } from './payload';
import { createSignatureVerifier } from './verify-signature';

export interface WebhookRouteOptions {
  webhookSecret: string;
  intake: Intake;
  /** Time allowed for Postgres before answering 500, well inside AgentMail's 15 s. */
  deadlineMs: number;
  bodyLimitBytes: number;
}

/** Postgres slower than the deadline: 500, so the sender's retry takes over. */
class DeadlineExceeded extends Error {
  override name = 'DeadlineExceeded';
}

/**
 * POST /webhooks/agentmail, the HTTP adapter of the intake. The order matters:
 * 1 verify the signature over the raw bytes (400, nothing recorded);
 * 2 an event_id this process recorded answers 204 at once (from memory: no database, no Temporal);
 * 3 otherwise ONE statement records the event and the intake row (the job, keyed by the workflow ID) and
 *   advances the inbox's cursor: a new row → `queued`, an existing one → `duplicate`;
 * 4 answer 204 once that committed — the message is ours now;
 * 5 after the commit, the intake (intake/intake.ts `accept`) starts the workflow in this process
 *   without holding the answer; whatever it does not start, its relay does.
 * Postgres failing or slower than the deadline → 500, nothing half-recorded (one statement).
 * Temporal does not take part in the answer at all.
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
    const deadline = Date.now() + options.deadlineMs;
    const left = () => Math.max(1, deadline - Date.now());
    const { intake } = options;

    // An event this process recorded: answered from memory. Any other goes to ONE statement, which
    // decides new or duplicate itself (another replica's event, or this one's before a restart).
    if (intake.remembers(eventId)) {
      settle(request, 'duplicate');
      // At debug: a retry storm is thousands of these a second, each a synchronous write, and
      // replyonce_webhooks_total{outcome="duplicate"} already counts them.
      request.log.debug({ eventId, outcome: 'duplicate' }, 'webhook duplicate event');
      return reply.code(204).send();
    }

    if (eventType !== 'message.received') {
      const recorded = await withinDeadline(intake.recordIgnored({ eventId, eventType }, left()), left());
      const outcome = recorded ? 'ignored' : 'duplicate';
      settle(request, outcome);
      request.log.info({ eventId, eventType, outcome }, 'webhook event type not handled');
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
    const messageTime = timestamp === undefined ? undefined : clampMessageTime(timestamp);
    if (messageTime?.clampedFrom)
      request.log.warn(
        { eventId, messageTime: messageTime.clampedFrom.toISOString(), clampedTo: messageTime.at.toISOString() },
        'webhook message time is in the future; clamped to now',
      );
    // The intake owns the hand-over: the commit, then its starter or its relay.
    const { outcome, job } = await withinDeadline(
      intake.accept({ eventId, inboxId, messageId, threadId, messageAt: messageTime?.at }, { timeoutMs: left() }),
      left(),
    );
    settle(request, outcome);
    request.log.info({ eventId, workflowId: job.workflowId, outcome }, `webhook ${outcome}`);
    return reply.code(204).send();
  });
};

/**
 * The pg query timeout bounds each statement; this bounds the wait for a pool connection too, so
 * the answer is never later than the deadline. A statement that still commits after a 500 is
 * complete (one statement): the sender's retry finds its event and answers 204, and the relay
 * starts its row.
 */
async function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded(`Postgres did not answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

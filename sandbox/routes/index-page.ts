import type { FastifyInstance } from 'fastify';

/**
 * GET /_sandbox: what the control API offers, so a developer need not read the code. The README's
 * sandbox table lists the same routes; test/sandbox.test.ts checks that every route listed here
 * exists (and that every /_sandbox route is listed).
 */
export const SANDBOX_CONTROLS = [
  [
    'POST',
    '/_sandbox/inbound',
    'mail arrives: {inbox_id, from, subject?, text?, headers?, reply_to?, attachments?: [{filename?, content_type?, content (base64) | text, repeat?}], …}; `deliver: false` stores it without a webhook, `duplicates: N` sends the same event N more times, `event_id` picks its id. In a thread: `thread_id` (from an earlier answer) joins that thread, or `in_reply_to` (a message_id) joins the thread of the message it answers; `message_id` picks its id',
  ],
  ['POST', '/_sandbox/inboxes', 'creates an inbox {inbox_id, display_name?}'],
  [
    'GET',
    '/_sandbox/downloads/:token',
    "an attachment's bytes at the signed download_url GET …/attachments/:attachment_id gives (no API key; 403 once expired, an hour on the sandbox clock)",
  ],
  ['GET', '/_sandbox/outbox', 'what we sent (?inbox_id=, ?in_reply_to=): count and entries'],
  ['GET', '/_sandbox/state', 'counts of inboxes, messages, drafts, events, deliveries'],
  [
    'GET',
    '/_sandbox/writes',
    'every API request but a read (method, path): sends, drafts, labels — what a rehearsal never makes',
  ],
  ['POST', '/_sandbox/reset', 'forgets everything'],
  ['GET', '/_sandbox/webhook', 'the webhook endpoint deliveries go to'],
  ['POST', '/_sandbox/webhook', 'changes it: {url?, enabled?}'],
  ['POST', '/_sandbox/webhooks/others', "adds another webhook of the organisation (a colleague's; never delivered to)"],
  ['GET', '/_sandbox/events', 'every event published, with its delivery state'],
  ['GET', '/_sandbox/events/:event_id', 'one event and its attempts'],
  [
    'POST',
    '/_sandbox/events/:event_id/redeliver',
    'delivers the same event again (same event_id and svix-id), as Svix does on retry',
  ],
  [
    'POST',
    '/_sandbox/events/:event_id/resend-as-new',
    'sends the same message under a new event_id (a duplicate the event dedupe cannot see)',
  ],
  ['GET', '/_sandbox/deliveries', 'delivery attempts (?event_id=)'],
  ['GET', '/_sandbox/idempotency-keys', 'the Idempotency-Keys sends carried, and what each answered'],
  ['GET', '/_sandbox/clock', 'the sandbox clock (it can run ahead to expire idempotency keys)'],
  ['POST', '/_sandbox/clock/advance', 'moves it forward {ms}'],
  ['GET', '/_sandbox/faults', 'armed fault rules'],
  [
    'POST',
    '/_sandbox/faults',
    'arms rules (replaces all): a status, a delay, a dropped connection before or after the commit, by method and path',
  ],
  ['DELETE', '/_sandbox/faults', 'clears them'],
] as const;

export function indexRoute(app: FastifyInstance): void {
  app.get('/_sandbox', async () => ({
    description: 'The local AgentMail stand-in: /v0/* is the API (Bearer AGENTMAIL_API_KEY); /_sandbox/* controls it.',
    threads:
      'A follow-up in the same conversation: POST /_sandbox/inbound with `in_reply_to` set to the earlier message_id (or `thread_id` set to its thread_id); both are in the answer of the first POST.',
    controls: SANDBOX_CONTROLS.map(([method, path, does]) => ({ method, path, does })),
  }));
}

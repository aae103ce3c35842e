import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Failpoint } from '../lib/failpoints';
import { providerIdempotencyKey } from '../lib/hashing';
import { draftKey, type MessageRef, threadTicketKey, ticketKey } from '../contract';
import { commentMarker } from '../activities/ticket/zendesk-tickets';
import { buildHelpdeskStandIn } from '../sandbox/helpdesk/app';
import { HelpdeskControl } from '../sandbox/helpdesk/control-client';
import { buildModelStandIn } from '../sandbox/model/app';
import { ModelStandInControl } from '../sandbox/model/control-client';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';

// Real worker processes (`worker/main.ts`, configured only by the environment as in production:
// DRAFT_PROVIDER=openai-compatible against the model stand-in, TICKET_PROVIDER=zendesk against
// the help-desk stand-in), killed with SIGKILL between an effect and its record. Calls and
// tickets are counted at the stand-ins.
let h: Harness;
let model: ModelStandInControl;
let helpdesk: HelpdeskControl;
const closers: Array<() => Promise<unknown>> = [];
const workers: AppProcess[] = [];
let providerEnv: Record<string, string>;
// The deployment's secret that marks our Zendesk comments (ZENDESK_MARKER_SECRET).
const MARKER_SECRET = 'provider-crashes-marker-secret-0123456789abcdef';

before(async () => {
  const modelStandIn = buildModelStandIn({ apiKey: 'sk-stand-in' });
  await modelStandIn.app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => modelStandIn.app.close());
  model = new ModelStandInControl(`http://127.0.0.1:${(modelStandIn.app.server.address() as AddressInfo).port}`);
  const helpdeskStandIn = buildHelpdeskStandIn({ email: 'bot@example.com', apiToken: 'zendesk-token' });
  await helpdeskStandIn.app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => helpdeskStandIn.app.close());
  helpdesk = new HelpdeskControl(`http://127.0.0.1:${(helpdeskStandIn.app.server.address() as AddressInfo).port}`);
  providerEnv = {
    DRAFT_PROVIDER: 'openai-compatible',
    DRAFT_MODEL: 'stand-in-model',
    DRAFT_BASE_URL: model.apiUrl,
    DRAFT_API_KEY: 'sk-stand-in',
    TICKET_PROVIDER: 'zendesk',
    ZENDESK_URL: helpdesk.baseUrl,
    ZENDESK_EMAIL: 'bot@example.com',
    ZENDESK_API_TOKEN: 'zendesk-token',
    ZENDESK_MARKER_SECRET: MARKER_SECRET,
  };
  h = await Harness.start({ worker: false });
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await h.close();
  for (const close of closers) await close();
});

async function startWorker(failpoints: Failpoint[] = []): Promise<AppProcess> {
  const worker = await AppProcess.startWorker(h, { failpoints, env: providerEnv });
  workers.push(worker);
  return worker;
}

async function crashThenRecover(failpoint: Failpoint) {
  const crashing = await startWorker([failpoint]);
  const marker = `MARKER-${randomUUID()}`;
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `crash-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Crash me',
    text: `Please answer once. ${marker}`,
  });
  const ref: MessageRef = { inboxId, messageId: inbound.message.message_id };
  const threadId = inbound.message.thread_id;
  assert.equal((await crashing.exited).signal, 'SIGKILL', `the worker died at ${failpoint}`);
  const healthy = await startWorker();
  const result = await h.workflowResult(ref);
  await healthy.stop();
  return { ref, threadId, marker, result, modelCalls: (await model.calls({ contains: marker })).length };
}

const storedText = async (ref: MessageRef) =>
  (
    await h.db.query<{ text: string }>(`SELECT result->>'text' AS text FROM operations WHERE operation_key = $1`, [
      draftKey(ref),
    ])
  ).rows[0]?.text;

describe('worker processes configured for a model and Zendesk, killed mid-effect', () => {
  test('the worker logs which drafter and ticket provider it uses (never their secrets)', async () => {
    const worker = await startWorker();
    const [line] = worker.logs('worker polling');
    await worker.stop();
    assert.equal(line?.drafter, 'openai-compatible:stand-in-model');
    assert.equal(line?.tickets, 'zendesk');
    assert.ok(!JSON.stringify(worker.logLines).includes('zendesk-token'));
    assert.ok(!JSON.stringify(worker.logLines).includes('sk-stand-in'));
  });

  test('after the draft was stored, before the activity returned → the model is not asked again', async () => {
    const { ref, result, modelCalls } = await crashThenRecover('draft.after-store');
    assert.equal(result.status, 'sent');
    assert.equal(modelCalls, 1, 'one HTTP request at the model stand-in');
    const [sent] = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(sent?.message.text, await storedText(ref));
  });

  test('after the model answered, before the draft was stored → asked again (the answer died with the process); the email carries the stored text', async () => {
    const { ref, result, modelCalls } = await crashThenRecover('draft.after-effect');
    assert.equal(result.status, 'sent');
    assert.equal(modelCalls, 2);
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.equal(outbox[0]!.message.text, await storedText(ref));
  });

  test("after Zendesk created the thread's ticket, before its record → the next worker finds it by external id: one ticket", async () => {
    const { ref, threadId, result } = await crashThenRecover('thread-ticket.after-effect');
    const key = providerIdempotencyKey(threadTicketKey(ref.inboxId, threadId));
    const tickets = await helpdesk.tickets({ external_id: key });
    assert.equal(tickets.length, 1);
    assert.equal(result.status === 'sent' && result.ticketId, String(tickets[0]!.id));
    const ours = (await helpdesk.requests()).filter(
      (r) => r.idempotency_key === key || r.url.includes(encodeURIComponent(key)),
    );
    assert.deepEqual(
      ours.map((r) => [r.method, r.status]),
      [
        ['POST', 201],
        ['GET', 200],
      ],
      'one create, then the look-up that found it',
    );
  });

  test("after Zendesk added the message's comment, before its record → the next worker finds its marker in the audits: one comment", async () => {
    const { ref, marker, result } = await crashThenRecover('ticket.after-effect');
    assert.equal(result.status, 'sent');
    const ticketId = result.status === 'sent' ? result.ticketId : null;
    assert.ok(ticketId !== null);
    const comments = await helpdesk.comments(ticketId);
    assert.equal(comments.filter((c) => c.body.includes(marker)).length, 1, 'the message once on the ticket');
    assert.equal(comments.filter((c) => c.body.includes(commentMarker(ticketKey(ref), MARKER_SECRET))).length, 1);
    const updates = (await helpdesk.requests()).filter((r) => r.path.startsWith(`/api/v2/tickets/${ticketId}`));
    assert.deepEqual(
      updates.map((r) => [r.method, r.path.replace(`/${ticketId}`, '/{id}'), r.status]),
      [
        ['PUT', '/api/v2/tickets/{id}.json', 200],
        ['GET', '/api/v2/tickets/{id}/audits.json', 200],
        ['PUT', '/api/v2/tickets/{id}.json', 200],
      ],
      "the comment, the look-up that found it after the crash, then our reply's comment",
    );
  });
});

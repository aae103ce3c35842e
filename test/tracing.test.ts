import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../contract';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver';
import { eventually } from './support/temporal';

// One message is one trace, across real processes: the API and the worker run as
// `npm run start:api` / `start:worker` run them, with the standard OTEL_* variables pointing at a
// collector stand-in on loopback, and the sandbox delivers a signed webhook to that API.
let h: Harness;
let receiver: OtlpReceiver;
let api: AppProcess & { url: string };
let worker: AppProcess;

before(async () => {
  h = await Harness.start({ worker: false });
  receiver = await OtlpReceiver.start();
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '100', // export within a tenth of a second, not the default 5 s
  };
  // Without a prebuilt bundle the worker bundles its workflows with tracing's workflow interceptors.
  worker = await AppProcess.startWorker(h, { env: { ...otel, REPLYONCE_WORKFLOW_BUNDLE: '' } });
  api = await AppProcess.startApi(h, { env: { ...otel, OTEL_SERVICE_NAME: 'ingress-under-test' } });
  await h.sandbox.setWebhook({ url: `${api.url}/webhooks/agentmail` });
});

after(async () => {
  if (process.env.OTLP_DUMP)
    (await import('node:fs')).writeFileSync(process.env.OTLP_DUMP, JSON.stringify(receiver.spans, null, 1));
  await Promise.all([api?.stop(), worker?.stop()]);
  await receiver?.close();
  await h?.close();
});

const SUBJECT = `Where is parcel ${randomUUID().slice(0, 6)}?`;
const BODY = `It left the depot ${randomUUID()} days ago.`;
const SENDER = `ada-${randomUUID().slice(0, 8)}@customer.example`;

const parentOf = (trace: ReceivedSpan[], span: ReceivedSpan) => trace.find((s) => s.spanId === span.parentSpanId);
function ancestors(trace: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const chain: ReceivedSpan[] = [];
  for (let p = parentOf(trace, span); p; p = parentOf(trace, p)) chain.push(p);
  return chain;
}
const named = (trace: ReceivedSpan[], name: string) => trace.filter((s) => s.name === name);

describe('tracing (OTEL_EXPORTER_OTLP_ENDPOINT set)', () => {
  let ref: MessageRef;
  let eventId: string;
  let trace: ReceivedSpan[];

  test(
    'one message is one trace: webhook → start → workflow → every activity → the reply call, parents intact across the worker boundary',
    { timeout: 120_000 },
    async () => {
      // Prepare + Act: one inbound message, delivered by the sandbox to the traced API
      const inboxId = h.newInbox();
      const inbound = await h.sandbox.inbound({ inbox_id: inboxId, from: SENDER, subject: SUBJECT, text: BODY });
      ref = { inboxId, messageId: inbound.message.message_id };
      eventId = inbound.event_id;
      const result = await h.resultOf(ref, 60_000);
      assert.equal(result.status, 'sent');
      const workflowId = inboundWorkflowId(ref);

      // Assess: the trace that names the workflow, once its last activity's spans are in
      trace = await eventually(
        async () => {
          const start = receiver.spans.find(
            (s) => s.name === 'StartWorkflow:inboundMessageWorkflow' && s.attributes.temporalWorkflowId === workflowId,
          );
          const spans = start ? receiver.trace(start.traceId) : [];
          return spans.some((s) => s.name === 'RunWorkflow:inboundMessageWorkflow') &&
            spans.some((s) => s.name === 'RunActivity:finishReply')
            ? spans
            : undefined;
        },
        'the message trace to be exported',
        30_000,
      );

      const roots = trace.filter((s) => !s.parentSpanId);
      assert.equal(roots.length, 1, `one root, got ${roots.map((r) => `${r.service}:${r.name}`).join(', ')}`);
      const root = roots[0]!;
      assert.equal(root.service, 'ingress-under-test', 'OTEL_SERVICE_NAME names the API');
      assert.equal(root.kind, 2, 'the root is the webhook request (a server span)');
      assert.match(String(root.attributes['http.target'] ?? root.attributes['url.path']), /^\/webhooks\/agentmail/);
      assert.ok(
        trace.some((s) => s.attributes['replyonce.webhook.outcome'] === 'queued'),
        'the outcome is in the trace',
      );

      const [start] = named(trace, 'StartWorkflow:inboundMessageWorkflow');
      assert.ok(start && ancestors(trace, start).includes(root), 'the start is inside the webhook span');
      assert.equal(start.attributes['replyonce.workflow.started'], true);

      const [run] = named(trace, 'RunWorkflow:inboundMessageWorkflow');
      assert.equal(run?.service, 'replyonce-worker');
      assert.equal(run.parentSpanId, start.spanId, 'the workflow run continues the start, across processes');

      for (const activity of ['decideReply', 'draftReply', 'openTicket', 'sendReply', 'finishReply']) {
        const runs = named(trace, `RunActivity:${activity}`);
        assert.equal(runs.length, 1, `one RunActivity:${activity}`);
        assert.ok(ancestors(trace, runs[0]!).includes(run), `${activity} runs under the workflow`);
        assert.equal(runs[0]!.attributes['temporal.activity.attempt'], 1);
      }
      const [send] = named(trace, 'RunActivity:sendReply');
      assert.equal(send!.attributes['replyonce.operation.kind'], 'reply');
      assert.equal(send!.attributes['replyonce.operation.status'], 'executed');
      assert.equal(send!.attributes['replyonce.send.outcome'], 'sent');

      // The sandbox's reply call: the AgentMail SDK's fetch, under the send activity
      const replyCall = trace.find(
        (s) =>
          s.kind === 3 &&
          ancestors(trace, s).includes(send!) &&
          /\/messages\/.+\/reply/.test(String(s.attributes['url.full'] ?? s.attributes['url.path'] ?? '')),
      );
      assert.ok(replyCall, `an HTTP client span for the reply under sendReply; got ${summarize(trace)}`);
      assert.equal(replyCall.attributes['http.response.status_code'], 200);
      assert.match(String(replyCall.attributes['url.full']), /\/v0\/inboxes\/\[redacted\]\/messages\//);

      // The operation store's queries are in the trace too (pg), under an activity
      assert.ok(
        trace.some((s) => s.service === 'replyonce-worker' && /^pg\.query/.test(s.name)),
        'pg spans from the worker',
      );

      // Logs join the trace: the API's line for this delivery carries its trace id
      const logged = api.logs('webhook queued', { eventId });
      assert.equal(logged[0]?.trace_id, root.traceId);

      // The worker counted how the run ended (its workflow interceptor module, bundled at start)
      const metricsUrl = String(worker.logs('worker polling')[0]?.metrics);
      const metrics = await (await fetch(metricsUrl)).text();
      assert.match(metrics, /^replyonce_workflow_outcomes_total\{status="sent"\} 1$/m);
    },
  );

  test(
    'a duplicate delivery is its own short trace: outcome duplicate, no workflow span',
    { timeout: 60_000 },
    async () => {
      assert.ok(trace, 'needs the first test');
      // Act: the sandbox redelivers the same event
      const redelivered = await h.sandbox.redeliver(eventId);
      assert.equal(redelivered.status, 204);

      // Assess
      const dupTrace = await eventually(
        async () => {
          const marked = receiver.spans.find(
            (s) => s.attributes['replyonce.webhook.outcome'] === 'duplicate' && s.traceId !== trace[0]!.traceId,
          );
          return marked ? receiver.trace(marked.traceId) : undefined;
        },
        'the duplicate delivery trace',
        15_000,
      );
      assert.ok(
        dupTrace.every((s) => s.service === 'ingress-under-test'),
        'nothing reached the worker',
      );
      assert.equal(named(dupTrace, 'StartWorkflow:inboundMessageWorkflow').length, 0, 'no start');
      assert.ok(!dupTrace.some((s) => s.name.startsWith('RunWorkflow')), 'no workflow span');
    },
  );

  test(
    'a send AgentMail answers 503 once: two sendReply attempts in the trace, the first call with its status, counted as a provider error',
    { timeout: 90_000 },
    async () => {
      // Prepare: the first reply call for this inbox fails
      const inboxId = h.newInbox();
      await h.sandbox.setFaults({
        match: { method: 'POST', path: `/inboxes/${inboxId}/messages/`, count: 1 },
        action: 'status',
        status: 503,
      });
      // Act
      const inbound = await h.sandbox.inbound({ inbox_id: inboxId, from: SENDER, subject: SUBJECT, text: BODY });
      const retried = { inboxId, messageId: inbound.message.message_id };
      assert.equal((await h.resultOf(retried, 60_000)).status, 'sent');
      await h.sandbox.clearFaults();

      // Assess
      const workflowId = inboundWorkflowId(retried);
      const spans = await eventually(
        async () => {
          const start = receiver.spans.find((s) => s.attributes.temporalWorkflowId === workflowId);
          const found = start ? receiver.trace(start.traceId) : [];
          return named(found, 'RunActivity:sendReply').length === 2 &&
            found.some((s) => s.name === 'RunActivity:finishReply')
            ? found
            : undefined;
        },
        'the retried message trace',
        30_000,
      );
      const attempts = named(spans, 'RunActivity:sendReply').sort(
        (a, b) => Number(a.attributes['temporal.activity.attempt']) - Number(b.attributes['temporal.activity.attempt']),
      );
      assert.deepEqual(
        attempts.map((a) => a.attributes['temporal.activity.attempt']),
        [1, 2],
      );
      const callsUnder = (attempt: ReceivedSpan) =>
        spans.filter((s) => s.kind === 3 && s.name === 'POST' && s.parentSpanId === attempt.spanId);
      assert.deepEqual(
        callsUnder(attempts[0]!).map((s) => s.attributes['http.response.status_code']),
        [503],
      );
      assert.deepEqual(
        callsUnder(attempts[1]!).map((s) => s.attributes['http.response.status_code']),
        [200],
      );
      assert.equal(attempts[1]!.attributes['replyonce.send.outcome'], 'sent');
      const metrics = await (await fetch(String(worker.logs('worker polling')[0]?.metrics))).text();
      assert.match(metrics, /^replyonce_provider_errors_total\{provider="agentmail",status="503"\} 1$/m);
    },
  );

  test('no exported span carries a body, a subject, the drafted text, an address or a secret', async () => {
    assert.ok(receiver.spans.length > 20, `spans were exported (${receiver.spans.length})`);
    const drafted = (await h.sandbox.outbox({ inbox_id: ref.inboxId }))[0]?.message.text;
    assert.ok(drafted, 'the reply was sent');
    // The drafted text line by line, so a shortened copy of it is caught too
    const draftedLines = drafted.split('\n').filter((line) => line.trim().length >= 20);
    const forbidden = [SUBJECT, BODY, ...draftedLines, SENDER, ref.inboxId, h.webhookSecret, h.apiKey, 'Bearer'];
    for (const span of receiver.spans) {
      for (const value of span.strings) {
        for (const secret of forbidden)
          assert.ok(!value.includes(secret), `${span.service}:${span.name} carries ${secret}: ${value}`);
        assert.doesNotMatch(value, /[^\s/<>@](@|%40)/, `${span.service}:${span.name} carries an address: ${value}`);
      }
    }
  });
});

function summarize(trace: ReceivedSpan[]): string {
  return trace.map((s) => `${s.service}:${s.name}(${String(s.attributes['url.full'] ?? '')})`).join(', ');
}

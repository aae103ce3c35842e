import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { inboundWorkflowId } from '../lib/hashing';
import type { MessageRef } from '../contract';
import { buildModelStandIn, type ModelStandIn } from '../sandbox/model/app';
import type { BehaviourInput } from '../sandbox/model/behaviours';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { historyText } from './support/history';
import { OtlpReceiver } from './support/otlp-receiver';
import { eventually } from './support/temporal';

// Issue 18 point 9: what a model provider returns stays out of Temporal history, the worker's log
// and its spans. The worker runs as `npm run start:worker` runs it, drafting through the AI SDK
// against the model stand-in, with tracing on; the stand-in answers with a canary in its body.
const API_KEY = 'sk-stand-in';
let h: Harness;
let standIn: ModelStandIn;
let receiver: OtlpReceiver;
let worker: AppProcess;

before(async () => {
  h = await Harness.start({ worker: false });
  standIn = buildModelStandIn({ apiKey: API_KEY });
  await standIn.app.listen({ port: 0, host: '127.0.0.1' });
  receiver = await OtlpReceiver.start();
  worker = AppProcess.spawnWorker(h, {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // The prebuilt workflow bundle: the activities' spans are what carry a provider's failures.
      DRAFT_PROVIDER: 'openai-compatible',
      DRAFT_MODEL: 'stand-in-model',
      DRAFT_BASE_URL: `http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}/v1`,
      DRAFT_API_KEY: API_KEY,
      LOG_LEVEL: 'debug',
    },
  });
  await worker
    .waitForLog((line) => line.msg === 'worker polling', 'the worker to start polling', 90_000)
    .catch((error: unknown) => {
      throw new Error(`${String(error)}; its stderr: ${worker.stderr.slice(-2000)}`);
    });
});
after(async () => {
  await worker?.stop();
  await receiver?.close();
  await standIn?.app.close();
  await h?.close();
});

async function arrive(marker: string): Promise<MessageRef> {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `ada-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Where is my order?',
    text: `I ordered a difference engine. ${marker}`,
  });
  return { inboxId, messageId: inbound.message.message_id };
}

test(
  "a model's malformed 200s and error bodies reach no workflow history, log line or span",
  { timeout: 150_000 },
  async () => {
    // Prepare: three messages, each met by the stand-in with its canary in the answer's body
    const canary = `CANARY-${randomUUID()}`;
    const markers = { malformed: `M-${randomUUID()}`, cut: `C-${randomUUID()}`, rejected: `R-${randomUUID()}` };
    const rules: BehaviourInput[] = [
      // Two unreadable 200s (wrong shape, then cut-off JSON), retried; the third attempt drafts.
      { match: { contains: markers.malformed }, count: 1, action: 'malformed', text: `${canary} the drafted text` },
      { match: { contains: markers.malformed }, count: 1, action: 'malformed', cut: true, text: canary },
      { match: { contains: markers.cut }, count: 1, action: 'malformed', cut: true, text: canary },
      { match: { contains: markers.cut }, count: 1, action: 'status', status: 503, text: `overloaded ${canary}` },
      // A 400 is final: the run fails with the failure in its history.
      { match: { contains: markers.rejected }, action: 'status', status: 400, text: `bad request: ${canary}` },
    ];
    standIn.behaviours.set(rules.map((rule) => ({ match: {}, ...rule })));

    // Act
    const refs = {
      malformed: await arrive(markers.malformed),
      cut: await arrive(markers.cut),
      rejected: await arrive(markers.rejected),
    };
    const results = {
      malformed: await h.resultOf(refs.malformed, 60_000),
      cut: await h.resultOf(refs.cut, 60_000),
      rejected: await h.resultOf(refs.rejected, 60_000).then(
        () => 'completed',
        (error: unknown) => (error instanceof Error ? error.name : String(error)),
      ),
    };

    // Assert: the failures happened and were recorded (the checks below are not vacuous)…
    assert.equal(results.malformed.status, 'sent');
    assert.equal(results.cut.status, 'sent');
    assert.equal(results.rejected, 'WorkflowFailedError');
    const outcomes = standIn.calls.map((call) => call.outcome);
    assert.equal(outcomes.filter((o) => o === 'malformed').length, 3, `the stand-in's answers: ${outcomes.join(', ')}`);
    const histories = {
      malformed: await historyText(h.client, h.client.workflow.getHandle(inboundWorkflowId(refs.malformed))),
      cut: await historyText(h.client, h.client.workflow.getHandle(inboundWorkflowId(refs.cut))),
      rejected: await historyText(h.client, h.client.workflow.getHandle(inboundWorkflowId(refs.rejected))),
    };
    assert.match(histories.malformed.text, /DraftMalformedResponse/, 'the retried attempt is in the history');
    assert.match(histories.cut.text, /DraftProviderUnavailable/, 'the 503 is in the history');
    assert.match(histories.rejected.text, /DraftRequestRejected/, 'the final failure is in the history');
    assert.match(histories.rejected.text, /\(400\)/, 'the status is in the failure');
    const spansOfDrafts = await eventually(
      async () => {
        const drafts = receiver.spans.filter((s) => s.name === 'RunActivity:draftReply');
        return drafts.length >= 7 ? drafts : undefined;
      },
      'the draft attempts’ spans',
      20_000,
    );
    assert.ok(spansOfDrafts.length >= 7);

    // …and the canary is nowhere: not in any history, log line (stdout or stderr) or span
    for (const [name, history] of Object.entries(histories))
      assert.ok(!history.text.includes(canary), `the ${name} run's history holds the provider's text`);
    const logged = worker.logLines.map((line) => JSON.stringify(line)).join('\n') + worker.stderr;
    assert.ok(worker.logLines.length > 0);
    for (const line of logged.split('\n'))
      assert.ok(!line.includes(canary), `a worker log line holds the provider's text: ${line.slice(0, 400)}`);
    for (const span of receiver.spans)
      for (const value of span.strings)
        assert.ok(!value.includes(canary), `span ${span.service}:${span.name} holds the provider's text: ${value}`);
  },
);

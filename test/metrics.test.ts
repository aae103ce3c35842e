import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { messageReceivedBody } from '../sandbox/control-client';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';
import { signedHeaders } from './support/signing';

// /metrics in Prometheus format on the API and on a worker process, counting what happened.
let h: Harness;
before(async () => {
  h = await Harness.start({ worker: false });
});
after(() => h.close());

/** The value of one sample line, e.g. `replyonce_webhooks_total{outcome="queued"}`, or 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

test('the API and the worker expose counters for webhooks, acks, operations and sends', async () => {
  const worker = await AppProcess.startWorker(h);
  try {
    const before = await (await fetch(h.metricsUrl)).text();
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `metrics-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Hi',
      text: 'Count me.',
    });
    const ref = { inboxId, messageId: inbound.message.message_id };
    assert.equal((await h.resultOf(ref)).status, 'sent');
    const body = messageReceivedBody(inbound, inbound.event_id);
    await fetch(`${h.apiUrl}/webhooks/agentmail`, {
      method: 'POST',
      body,
      headers: signedHeaders(h.webhookSecret, body),
    });
    await fetch(`${h.apiUrl}/webhooks/agentmail`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });

    const api = await (await fetch(h.metricsUrl)).text();
    const delta = (series: string) => sample(api, series) - sample(before, series);
    assert.equal(delta('replyonce_webhooks_total{outcome="queued"}'), 1);
    assert.equal(delta('replyonce_webhooks_total{outcome="duplicate"}'), 1);
    assert.equal(delta('replyonce_webhooks_total{outcome="invalid"}'), 1);
    assert.ok(delta('replyonce_webhook_ack_seconds_count{outcome="queued"}') >= 1);

    const metricsUrl = String(worker.logs('worker polling')[0]?.metrics);
    const workerMetrics = await (await fetch(metricsUrl)).text();
    assert.equal(sample(workerMetrics, 'replyonce_sends_total{outcome="sent"}'), 1);
    for (const kind of ['decision', 'draft', 'ticket', 'reply']) {
      assert.equal(sample(workerMetrics, `replyonce_operations_total{kind="${kind}",status="executed"}`), 1, kind);
    }
    assert.match(workerMetrics, /^replyonce_process_cpu_user_seconds_total /m);
  } finally {
    await worker.stop();
  }
});

// Issue 18 point 10: the API's metrics are not on its public port.
test("the API's /metrics is on a loopback listener of its own (API_METRICS_PORT), not on the public port", async () => {
  const api = await AppProcess.startApi(h);
  try {
    const publicPort = await fetch(`${api.url}/metrics`);
    assert.equal(publicPort.status, 404, 'the port AgentMail posts to serves no metrics');
    await publicPort.arrayBuffer();
    const metricsUrl = new URL(api.metricsUrl);
    assert.equal(metricsUrl.hostname, '127.0.0.1', 'loopback unless API_METRICS_HOST says otherwise');
    assert.notEqual(metricsUrl.port, new URL(api.url).port);
    const served = await fetch(api.metricsUrl);
    assert.equal(served.status, 200);
    assert.match(await served.text(), /^# TYPE replyonce_webhooks_total counter$/m);
  } finally {
    await api.stop();
  }

  // A chosen port: exactly that one (here any free one, 0), on the host named.
  const pinned = await AppProcess.startApi(h, { env: { API_METRICS_PORT: '0', API_METRICS_HOST: '127.0.0.1' } });
  try {
    assert.equal((await fetch(pinned.metricsUrl)).status, 200);
  } finally {
    await pinned.stop();
  }
});

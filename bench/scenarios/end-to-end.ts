import { Client, Connection } from '@temporalio/client';
import type { BenchContext } from '../support/context';
import { NAMESPACE } from '../support/environment';
import { meanMessageHistory } from '../support/history-cost';
import { CpuMeter, cpuPer, loadAverage, othersBusy, sleep } from '../support/context';
import { seedMessages, seededRandom, type SeededMessage } from '../support/deliveries';
import { failures, runOpenLoop, type Delivery } from '../support/load';
import { repliesSent, resetSandbox, startOurSide, WEBHOOK_PATH } from '../support/sides';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * Scenarios 3 and 5 (end-to-end half): N messages whose first deliveries are spread over a
 * window, each delivered 3 times at random delays — twice as the same event (a Svix retry: same
 * svix-id and event_id) and once re-emitted under a new event_id (the same message again) — all
 * interleaved out of order. Measured: time to drain (first delivery → last reply accepted by the
 * sandbox), and per message the time from its first delivery to its reply's `sent_at` in the
 * sandbox's outbox. Every message must get exactly one reply; anything else fails the bench.
 */

export interface EndToEndFigures {
  repeat: number;
  load: string;
  messages: number;
  deliveries: number;
  ackFailures: string;
  ack: LatencySummary;
  replies: number;
  /** Messages with more than one reply, and the extra replies. */
  duplicateEmails: number;
  missingReplies: number;
  drainSeconds: number;
  /** Messages answered per second over the drain. */
  throughput: number;
  latency: LatencySummary;
  cpuMsPerMessage: Record<string, number>;
  machineBusy: number;
  /** Share of the machine busy with processes outside the bench (a noisy neighbour). */
  othersBusy: number;
  loadAverage: [number, number, number];
  /** Temporal's cost per message: a sample of message workflows (the whole of it: turns need no other workflow). */
  historyEvents: { message: number };
  timedOut: boolean;
}

interface OutboxEntry {
  message: { inbox_id: string; in_reply_to?: string };
  sent_at: string;
}

interface Plan {
  deliveries: Delivery[];
  scheduleMs: Float64Array;
  /** For each delivery, the message it belongs to. */
  messageOf: Int32Array;
}

/** The delivery plan: three deliveries per message at random delays after its arrival, sorted by time. */
function plan(context: BenchContext, messages: SeededMessage[], seed: number): Plan {
  const { windowSeconds, deliveriesPerMessage, maxDelayMs } = context.options.e2e;
  const random = seededRandom(seed);
  const items: Array<{ at: number; message: number; body: string; svixId: string }> = [];
  messages.forEach((message, index) => {
    const arrival = random() * windowSeconds * 1000;
    const svixId = `msg_${message.eventId.slice(4)}`;
    for (let d = 0; d < deliveriesPerMessage; d++) {
      // The last copy is AgentMail emitting the message again under a new event id; the others are retries of one event.
      const reEmitted = d === deliveriesPerMessage - 1 && deliveriesPerMessage > 1;
      const body = reEmitted ? message.body.replace(message.eventId, `${message.eventId}_again`) : message.body;
      items.push({
        at: arrival + random() * maxDelayMs,
        message: index,
        body,
        svixId: reEmitted ? `${svixId}_again` : svixId,
      });
    }
  });
  items.sort((a, b) => a.at - b.at);
  return {
    deliveries: items.map((item) => context.signer.sign(item.body, item.svixId)),
    scheduleMs: Float64Array.from(items.map((item) => item.at)),
    messageOf: Int32Array.from(items.map((item) => item.message)),
  };
}

async function outbox(context: BenchContext): Promise<OutboxEntry[]> {
  const response = await fetch(`${context.sandbox.url}/_sandbox/outbox`);
  return ((await response.json()) as { entries: OutboxEntry[] }).entries;
}

export async function oneLoad(
  context: BenchContext,
  side: Awaited<ReturnType<typeof startOurSide>>,
  repeat: number,
  load: string,
  count: number,
  client: Client,
  /** Messages already in the sandbox to drain (the rehearsal scenario's); else the sandbox is reset and `count` seeded. */
  seeded?: SeededMessage[],
): Promise<EndToEndFigures> {
  const { drainTimeoutMs, windowSeconds, maxDelayMs } = context.options.e2e;
  if (seeded === undefined) await resetSandbox(context);
  const messages =
    seeded ??
    (await seedMessages(context.sandbox.url, count, (done) => context.log(`    seeded ${done}/${count} messages`)));
  const { deliveries, scheduleMs, messageOf } = plan(context, messages, repeat * 1_000 + count);
  const meter = CpuMeter.forRun(context, side.servers);
  const startedAt = Date.now();

  // Deliveries go out on their schedule while replies come back; progress is reported as it drains.
  let delivered = false;
  const sending = runOpenLoop({ origin: side.url, path: WEBHOOK_PATH }, deliveries, {
    scheduleMs,
    connections: 128,
    maxDurationMs: windowSeconds * 1000 + maxDelayMs + 20_000,
  }).finally(() => (delivered = true));
  let sent = 0;
  let lastReport = 0;
  let timedOut = false;
  while (!delivered || sent < count) {
    await sleep(200);
    sent = await repliesSent(context);
    if (Date.now() - lastReport > 3_000) {
      lastReport = Date.now();
      context.log(`    ${load}: ${sent}/${count} replies after ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
    }
    if (Date.now() - startedAt > drainTimeoutMs) {
      timedOut = true;
      break;
    }
  }
  const result = await sending;
  // A straggling duplicate would land after the last expected reply: give it a moment to show.
  await sleep(500);
  const usage = meter.read();
  const entries = await outbox(context);

  // First delivery per message (actual send time, wall clock) → its reply's sent_at.
  const firstSent = new Float64Array(count).fill(Number.POSITIVE_INFINITY);
  for (let i = 0; i < result.sentAt.length; i++) {
    const at = result.epochMs + (result.sentAt[i] as number);
    const message = messageOf[i] as number;
    if (at < (firstSent[message] as number)) firstSent[message] = at;
  }
  const indexOf = new Map(messages.map((m, i) => [`${m.inboxId}\n${m.messageId}`, i]));
  const repliesPer = new Int32Array(count);
  const latencies: number[] = [];
  let lastReply = 0;
  for (const entry of entries) {
    const index = indexOf.get(`${entry.message.inbox_id}\n${entry.message.in_reply_to ?? ''}`);
    if (index === undefined) continue;
    repliesPer[index] = (repliesPer[index] as number) + 1;
    const at = Date.parse(entry.sent_at);
    lastReply = Math.max(lastReply, at);
    if (repliesPer[index] === 1) latencies.push(at - (firstSent[index] as number));
  }
  let duplicateEmails = 0;
  let missingReplies = 0;
  for (const n of repliesPer) {
    if (n === 0) missingReplies += 1;
    if (n > 1) duplicateEmails += n - 1;
  }
  const historyEvents = { message: await meanMessageHistory(client, messages.slice(0, 20)) };
  const firstDelivery = Math.min(...firstSent.filter(Number.isFinite));
  const drainSeconds = (lastReply - firstDelivery) / 1000;
  const figures: EndToEndFigures = {
    repeat,
    load,
    messages: count,
    deliveries: deliveries.length,
    ackFailures: failures(result),
    ack: summarize(result.latencies),
    replies: entries.length,
    duplicateEmails,
    missingReplies,
    drainSeconds,
    throughput: count / drainSeconds,
    latency: summarize(latencies),
    cpuMsPerMessage: cpuPer(usage, count),
    machineBusy: usage.machineBusy,
    othersBusy: othersBusy(usage),
    loadAverage: loadAverage(),
    historyEvents,
    timedOut,
  };
  context.log(
    `  ${load} (${count} messages, ${deliveries.length} deliveries): drained in ${drainSeconds.toFixed(1)} s, ` +
      `webhook→reply p50 ${figures.latency.p50.toFixed(0)} ms p99 ${figures.latency.p99.toFixed(0)} ms, ` +
      `replies ${entries.length}/${count}, duplicates ${duplicateEmails}, ` +
      `history events ${historyEvents.message.toFixed(1)} per message` +
      `${figures.ackFailures ? `, ack failures ${figures.ackFailures}` : ''}${timedOut ? ', TIMED OUT' : ''}`,
  );
  return figures;
}

export async function runEndToEnd(context: BenchContext): Promise<EndToEndFigures[]> {
  const results: EndToEndFigures[] = [];
  const { messages } = context.options.e2e;
  const loads: Array<[string, number]> = [
    ['1×', messages[0]],
    ['4×', messages[1]],
    ['16×', messages[2]],
  ];
  for (let repeat = 0; repeat < context.options.e2eRepeats; repeat++) {
    // A clean Temporal server and one stack per repeat: each load drains completely before the next.
    await context.env.freshTemporal();
    const side = await startOurSide(context);
    const connection = await Connection.connect({ address: context.env.temporalAddress });
    const client = new Client({ connection, namespace: NAMESPACE });
    try {
      // Warm the path (JIT, connections, the workflow bundle) with a few messages, not counted.
      await warmUpEndToEnd(context, side);
      for (const [load, count] of loads) {
        context.log(`end to end repeat ${repeat + 1}/${context.options.e2eRepeats}: ${load}, ${count} messages`);
        results.push(await oneLoad(context, side, repeat, load, count, client));
      }
    } finally {
      await connection.close();
      await side.stop();
    }
  }
  return results;
}

export async function warmUpEndToEnd(
  context: BenchContext,
  side: Awaited<ReturnType<typeof startOurSide>>,
): Promise<void> {
  await resetSandbox(context);
  const messages = await seedMessages(context.sandbox.url, 10);
  await runOpenLoop(
    { origin: side.url, path: WEBHOOK_PATH },
    messages.map((m) => context.signer.sign(m.body)),
    { rate: 5, connections: 4, maxDurationMs: 10_000 },
  );
  const deadline = Date.now() + 30_000;
  while ((await repliesSent(context)) < messages.length && Date.now() < deadline) await sleep(200);
}

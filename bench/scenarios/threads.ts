import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { InboundMessageResult } from '../../contract';
import { inboundWorkflowId } from '../../lib/hashing';
import { meanMessageHistory } from '../support/history-cost';
import { messageReceivedBody, type InboundResult } from '../../sandbox/control-client';
import type { BenchContext } from '../support/context';
import { CpuMeter, cpuPer, sleep } from '../support/context';
import { INBOXES, seededRandom } from '../support/deliveries';
import { NAMESPACE } from '../support/environment';
import { resetSandbox, startOurSide, WEBHOOK_PATH } from '../support/sides';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * Conversations (issue 19): T threads × M messages each, a thread's messages arriving `spacingMs`
 * apart, each message delivered three times (twice as one event, once re-emitted under a new event
 * id) at random delays, so they arrive out of order. With the burst window on, each thread's
 * burst should be answered once. Checked: every message covered by exactly one reply or skip
 * (listed in a sent reply's `covers`, or answered-together naming a sent reply whose draft read it
 * though it asked after that reply's turn began), one email per reply. Measured: from
 * a thread's last message (its timestamp) to the email that answers it, p50/p99, and Temporal's
 * history events per message workflow.
 */

export interface ThreadsFigures {
  threads: number;
  messagesPerThread: number;
  messages: number;
  deliveries: number;
  coalesceMs: number;
  replies: number;
  uncovered: number;
  coveredTwice: number;
  answeredTogether: number;
  /** A thread's last message → the email that covers it. */
  lastMessageToReply: LatencySummary;
  /** Mean history events of a message workflow that sent a reply, and of one answered together. */
  historyEvents: { sent: number; answeredTogether: number };
  cpuMsPerMessage: Record<string, number>;
  seconds: number;
  timedOut: boolean;
}

interface Message {
  thread: number;
  inboxId: string;
  threadId: string;
  messageId: string;
  timestampMs: number;
}

export async function runThreads(context: BenchContext): Promise<ThreadsFigures> {
  const { threads, messagesPerThread, spacingMs, windowSeconds, maxDelayMs, coalesceMs, drainTimeoutMs } =
    context.options.threads;
  await resetSandbox(context);
  const side = await startOurSide(context, { env: { REPLY_COALESCE_MS: String(coalesceMs) } });
  const connection = await Connection.connect({ address: context.env.temporalAddress });
  const client = new Client({ connection, namespace: NAMESPACE });
  try {
    const random = seededRandom(19);
    const tag = randomUUID().slice(0, 8);
    const messages: Message[] = [];
    const startsMs = Array.from({ length: threads }, () => random() * windowSeconds * 1000);
    const meter = CpuMeter.forRun(context, side.servers);
    const startedAt = Date.now();
    let deliveries = 0;
    const sends: Array<Promise<void>> = [];
    const deliver = async (body: string, svixId: string) => {
      const delivery = context.signer.sign(body, svixId);
      const response = await fetch(`${side.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: delivery.headers,
        body: delivery.body,
      });
      await response.arrayBuffer();
      deliveries += 1;
    };
    // Each thread on its own timeline: its messages `spacingMs` apart, each one's deliveries after it.
    const timeline = async (thread: number) => {
      const inboxId = INBOXES[thread % INBOXES.length] as string;
      const threadId = randomUUID();
      await sleep(startsMs[thread] as number);
      for (let i = 0; i < messagesPerThread; i++) {
        if (i > 0) await sleep(spacingMs);
        const response = await fetch(`${context.sandbox.url}/_sandbox/inbound`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            inbox_id: inboxId,
            thread_id: threadId,
            from: `Customer ${thread} <customer-${tag}-${thread}@example.com>`,
            subject: `Order ${tag}-${thread}`,
            text: `Message ${i + 1} of a burst about order ${tag}-${thread}.`,
            deliver: false,
          }),
        });
        const answer = (await response.json()) as InboundResult;
        messages.push({
          thread,
          inboxId,
          threadId,
          messageId: answer.message.message_id,
          timestampMs: Date.parse(answer.message.timestamp),
        });
        const body = messageReceivedBody(answer, answer.event_id);
        const again = messageReceivedBody(answer, `${answer.event_id}_again`);
        const svixId = `msg_${answer.event_id.slice(4)}`;
        for (const [b, id] of [
          [body, svixId],
          [body, svixId],
          [again, `${svixId}_again`],
        ] as const)
          sends.push(sleep(random() * maxDelayMs).then(() => deliver(b, id)));
      }
    };
    await Promise.all(Array.from({ length: threads }, (_, t) => timeline(t)));
    await Promise.all(sends);
    context.log(`  threads: ${messages.length} messages, ${deliveries} deliveries sent; waiting for every run`);

    // Every message's run, to its end.
    const deadline = startedAt + drainTimeoutMs;
    const results = new Map<string, InboundMessageResult>();
    let timedOut = false;
    for (const m of messages) {
      const left = deadline - Date.now();
      if (left <= 0) {
        timedOut = true;
        break;
      }
      const handle = client.workflow.getHandle(inboundWorkflowId(m));
      const result = await Promise.race([
        handle.result() as Promise<InboundMessageResult>,
        // Unref'd: one timer per message until the deadline would keep the bench alive after its report.
        new Promise<null>((resolve) => setTimeout(resolve, left, null).unref()),
      ]);
      if (result === null) {
        timedOut = true;
        break;
      }
      results.set(`${m.inboxId}\n${m.messageId}`, result);
    }
    const seconds = (Date.now() - startedAt) / 1000;
    const usage = meter.read();

    // The invariant, and the latency from each thread's last message to the reply covering it.
    const outbox = (
      (await (await fetch(`${context.sandbox.url}/_sandbox/outbox`)).json()) as {
        entries: Array<{ message: { inbox_id: string; in_reply_to?: string }; sent_at: string }>;
      }
    ).entries;
    const sentAt = new Map(outbox.map((e) => [`${e.message.inbox_id}\n${e.message.in_reply_to ?? ''}`, e.sent_at]));
    const coverings = new Map<string, number>(messages.map((m) => [`${m.inboxId}\n${m.messageId}`, 0]));
    let answeredTogether = 0;
    for (const m of messages) {
      const key = `${m.inboxId}\n${m.messageId}`;
      const result = results.get(key);
      if (result?.status === 'sent' || result?.status === 'rejected')
        for (const covered of result.covers) {
          const coveredKey = `${m.inboxId}\n${covered}`;
          coverings.set(coveredKey, (coverings.get(coveredKey) ?? 0) + 1);
        }
      if (result?.status === 'skipped') coverings.set(key, (coverings.get(key) ?? 0) + 1);
      if (result?.status === 'answered-together') answeredTogether += 1;
    }
    // A message that asked after the covering run got its turn is not in that run's `covers`, but its
    // draft read it (activities/turns/ask-turn.ts asks the store): covered by that sent reply.
    for (const m of messages) {
      const result = results.get(`${m.inboxId}\n${m.messageId}`);
      if (result?.status !== 'answered-together') continue;
      const by = results.get(`${m.inboxId}\n${result.coveredBy}`);
      if (by?.status === 'sent' && !by.covers.includes(m.messageId)) {
        const key = `${m.inboxId}\n${m.messageId}`;
        coverings.set(key, (coverings.get(key) ?? 0) + 1);
      }
    }
    // Name what broke the invariant, so a failing run can be looked into (`temporal workflow show`).
    for (const [key, n] of coverings)
      if (n !== 1) {
        const [inboxId, messageId] = key.split('\n') as [string, string];
        const m = messages.find((x) => x.inboxId === inboxId && x.messageId === messageId);
        const thread = messages.filter((x) => x.threadId === m?.threadId);
        context.log(
          `  threads: ${messageId} covered ${n} times; its thread: ` +
            thread
              .map((x) => {
                const r = results.get(`${x.inboxId}\n${x.messageId}`);
                return `${inboundWorkflowId(x)} ${r?.status}${r && 'covers' in r ? ` covers ${r.covers.join(',')}` : ''}${r?.status === 'answered-together' ? ` by ${r.coveredBy}` : ''}`;
              })
              .join('; '),
        );
        if (process.env.BENCH_DUMP_DIR)
          for (const x of thread) {
            const history = await client.workflow.getHandle(inboundWorkflowId(x)).fetchHistory();
            writeFileSync(
              path.join(process.env.BENCH_DUMP_DIR, `${x.messageId.replace(/[^\w.-]/g, '_')}.json`),
              JSON.stringify(history, null, 1),
            );
          }
      }
    const uncovered = [...coverings.values()].filter((n) => n === 0).length;
    const coveredTwice = [...coverings.values()].filter((n) => n > 1).length;
    const latencies: number[] = [];
    for (let t = 0; t < threads; t++) {
      const own = messages.filter((m) => m.thread === t).sort((a, b) => a.timestampMs - b.timestampMs);
      const last = own[own.length - 1];
      if (!last) continue;
      const result = results.get(`${last.inboxId}\n${last.messageId}`);
      const holder =
        result?.status === 'answered-together' ? result.coveredBy : result?.status === 'sent' ? last.messageId : null;
      const at = holder !== null ? sentAt.get(`${last.inboxId}\n${holder}`) : undefined;
      if (at) latencies.push(Date.parse(at) - last.timestampMs);
    }

    // Temporal's cost: history events per message, from a sample of runs.
    const byStatus = (status: string) =>
      messages.filter((m) => results.get(`${m.inboxId}\n${m.messageId}`)?.status === status).slice(0, 20);
    const sentEvents = await meanMessageHistory(client, byStatus('sent'));
    const togetherEvents = await meanMessageHistory(client, byStatus('answered-together'));
    const figures: ThreadsFigures = {
      threads,
      messagesPerThread,
      messages: messages.length,
      deliveries,
      coalesceMs,
      replies: outbox.length,
      uncovered,
      coveredTwice,
      answeredTogether,
      lastMessageToReply: summarize(latencies),
      historyEvents: {
        sent: sentEvents,
        answeredTogether: togetherEvents,
      },
      cpuMsPerMessage: cpuPer(usage, messages.length),
      seconds,
      timedOut,
    };
    context.log(
      `  threads: ${threads} × ${messagesPerThread} (${deliveries} deliveries, window ${coalesceMs} ms): ${outbox.length} replies, ` +
        `${answeredTogether} answered together, uncovered ${uncovered}, covered twice ${coveredTwice}; ` +
        `last message → reply p50 ${figures.lastMessageToReply.p50.toFixed(0)} ms p99 ${figures.lastMessageToReply.p99.toFixed(0)} ms; ` +
        `history events: sent ${figures.historyEvents.sent.toFixed(1)}, together ${figures.historyEvents.answeredTogether.toFixed(1)}` +
        `${timedOut ? ', TIMED OUT' : ''}`,
    );
    return figures;
  } finally {
    await connection.close();
    await side.stop();
  }
}

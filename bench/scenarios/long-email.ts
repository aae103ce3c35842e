import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { InboundMessageResult } from '../../contract';
import { BUNDLED_HELP_CENTRE, syncConfigured } from '../../knowledge';
import { createDb } from '../../lib/db';
import { inboundWorkflowId } from '../../lib/hashing';
import { messageReceivedBody, type InboundResult } from '../../sandbox/control-client';
import type { BenchContext } from '../support/context';
import { CpuMeter, cpuPer, loadAverage, othersBusy, sleep } from '../support/context';
import { INBOXES, seededRandom } from '../support/deliveries';
import { NAMESPACE } from '../support/environment';
import { failures, runOpenLoop, type Delivery } from '../support/load';
import { repliesSent, resetSandbox, startOurSide, WEBHOOK_PATH } from '../support/sides';
import { summarize, type LatencySummary } from '../support/stats';

/**
 * One long email beside ordinary mail (issue 39, point 1): what a 5,000-line email costs everyone
 * else. The same 200 ordinary questions (the bundled help centre's, so the worker retrieves and
 * drafts from a real knowledge base) are delivered over a window, once alone and once with one
 * 5,000-line email among them whose every line is a different question, the hostile case of a
 * retrieval that searches each sentence. The two kinds of run alternate (A B B A …) so a noisy
 * neighbour hits both alike. Measured: the 200's webhook → reply p50/p99 in each, their ratio, and
 * the long email's own outcome and time. Checked: every message answered exactly once.
 */

export interface LongEmailRun {
  repeat: number;
  /** False: the 200 alone (the reference); true: the long email delivered among them. */
  withLongEmail: boolean;
  messages: number;
  ackFailures: string;
  /** The ordinary messages' first delivery → their reply's `sent_at`. */
  latency: LatencySummary;
  replies: number;
  missingReplies: number;
  duplicateEmails: number;
  drainSeconds: number;
  longEmail?: LongEmailOutcome;
  cpuMsPerMessage: Record<string, number>;
  othersBusy: number;
  loadAverage: [number, number, number];
  timedOut: boolean;
}

export interface LongEmailOutcome {
  lines: number;
  characters: number;
  /** The webhook's body (the message's text is in it), bytes. */
  webhookBytes: number;
  /** Its workflow's result: sent, handed off to a person…; 'unfinished' when it did not end in time. */
  status: string;
  /** Emails sent in reply to it (one, or none for an outcome without a reply). */
  emails: number;
  /** Its delivery → its reply's `sent_at`, or to its run's close when no reply was sent. */
  seconds: number;
}

export interface LongEmailFigures {
  messages: number;
  lines: number;
  /** The ordinary messages' deliveries were spread over this many seconds. */
  windowSeconds: number;
  runs: LongEmailRun[];
}

/** The bundled help centre's collection for this scenario, searched by every inbox of its worker. */
const COLLECTION = 'bench-long-email';

/**
 * Questions the help centre answers, worded as customers write them: the ordinary mail. Each of the
 * 200 is one of these with its own order number, so every message is new to retrieval and drafting.
 */
const QUESTIONS = [
  'Hi, do you ship to Norway? I live in Bergen.',
  'How much is delivery to Germany?',
  'How do I return a tent that is too small?',
  'Can I change the delivery address of my order?',
  'I forgot my password and cannot sign in, what do I do?',
  'When will my refund arrive after I sent the boots back?',
  'Do you offer gift cards?',
  'How long does shipping to Sweden take?',
];

/**
 * The long email: 5,000 short lines, each a different question-like sentence (no two share their
 * search terms, so de-duplicating the sentences folds nothing). Without bounds each line was a
 * search of its own (issue 39: ~15,000 queries for one email).
 */
export function longEmailText(lines: number): string {
  const things = ['tent', 'boots', 'jacket', 'stove', 'rucksack', 'lantern', 'sleeping bag', 'map'];
  const places = ['Oslo', 'Bergen', 'Leeds', 'Munich', 'Lyon', 'Malmo', 'Porto', 'Cork', 'Graz'];
  return Array.from(
    { length: lines },
    (_, i) =>
      `Can ${things[i % things.length]} ${i} ship to ${places[Math.floor(i / things.length) % places.length]} by ${(i % 28) + 1} May?`,
  ).join('\n');
}

interface Seeded {
  inboxId: string;
  messageId: string;
  body: string;
}

async function seed(context: BenchContext, mail: { inboxId: string; from: string; subject: string; text: string }) {
  const response = await fetch(`${context.sandbox.url}/_sandbox/inbound`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inbox_id: mail.inboxId,
      from: mail.from,
      subject: mail.subject,
      text: mail.text,
      deliver: false,
    }),
  });
  const answer = (await response.json()) as InboundResult;
  if (!response.ok) throw new Error(`the sandbox refused a message: ${response.status} ${JSON.stringify(answer)}`);
  return {
    inboxId: mail.inboxId,
    messageId: answer.message.message_id,
    body: messageReceivedBody(answer, answer.event_id),
  };
}

interface OutboxEntry {
  message: { inbox_id: string; in_reply_to?: string };
  sent_at: string;
}

async function outbox(context: BenchContext): Promise<OutboxEntry[]> {
  const response = await fetch(`${context.sandbox.url}/_sandbox/outbox`);
  return ((await response.json()) as { entries: OutboxEntry[] }).entries;
}

async function oneRun(
  context: BenchContext,
  side: Awaited<ReturnType<typeof startOurSide>>,
  client: Client,
  repeat: number,
  withLongEmail: boolean,
): Promise<LongEmailRun> {
  const { messages: count, lines, windowSeconds, longEmailAtShare, drainTimeoutMs } = context.options.longEmail;
  await resetSandbox(context);
  const tag = randomUUID().slice(0, 8);
  const ordinary: Seeded[] = [];
  for (let i = 0; i < count; i++)
    ordinary.push(
      await seed(context, {
        inboxId: INBOXES[i % INBOXES.length] as string,
        from: `Customer ${i} <customer-${tag}-${i}@example.com>`,
        subject: `Order ${tag}-${i}`,
        text: `${QUESTIONS[i % QUESTIONS.length]} My order number is ${tag}-${i}.`,
      }),
    );
  const longText = longEmailText(lines);
  const long = withLongEmail
    ? await seed(context, {
        inboxId: INBOXES[0] as string,
        from: `Long Email <long-${tag}@example.com>`,
        subject: `A few questions (${tag})`,
        text: longText,
      })
    : undefined;

  // The same plan in both kinds of run (the repeat's seed): the 200 spread over the window, and the
  // long email, when present, early in it so its work overlaps most of theirs.
  const random = seededRandom(39_000 + repeat);
  const planned = ordinary.map((m) => ({ body: m.body, at: random() * windowSeconds * 1000, ordinary: true }));
  if (long) planned.push({ body: long.body, at: longEmailAtShare * windowSeconds * 1000, ordinary: false });
  planned.sort((a, b) => a.at - b.at);
  const deliveries: Delivery[] = planned.map((p) => context.signer.sign(p.body));
  const meter = CpuMeter.forRun(context, side.servers);
  const startedAt = Date.now();
  let delivered = false;
  const sending = runOpenLoop({ origin: side.url, path: WEBHOOK_PATH }, deliveries, {
    scheduleMs: Float64Array.from(planned.map((p) => p.at)),
    connections: 64,
    maxDurationMs: windowSeconds * 1000 + 20_000,
  }).finally(() => (delivered = true));
  const expected = count + (long ? 1 : 0);
  let timedOut = false;
  // Replies come back while the deliveries go out; the long email may end without one (a hand-off),
  // so its run's result is awaited below rather than counted here.
  while (!delivered || (await repliesSent(context)) < count) {
    await sleep(200);
    if (Date.now() - startedAt > drainTimeoutMs) {
      timedOut = true;
      break;
    }
  }
  const result = await sending;
  const deliveredAt = new Map<string, number>();
  planned.forEach((p, i) => deliveredAt.set(p.body, result.epochMs + (result.sentAt[i] as number)));

  let longOutcome: LongEmailOutcome | undefined;
  if (long) {
    const handle = client.workflow.getHandle(inboundWorkflowId(long));
    const left = Math.max(1_000, startedAt + drainTimeoutMs - Date.now());
    // The deadline's timer is cleared once the run ends: a pending one would keep the bench alive after its report.
    let deadline: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      (handle.result() as Promise<InboundMessageResult>).then((r) => r.status as string),
      new Promise<string>((resolve) => (deadline = setTimeout(() => resolve('unfinished'), left))),
    ]).finally(() => clearTimeout(deadline));
    if (ended === 'unfinished') timedOut = true;
    // A sent long email was one of the replies counted above: wait for the ordinary ones it stood in for.
    while (ended === 'sent' && (await repliesSent(context)) < expected && Date.now() - startedAt < drainTimeoutMs)
      await sleep(200);
    const closedAt = (await handle.describe()).closeTime?.getTime() ?? Date.now();
    const sentAt = (await outbox(context)).find(
      (e) => e.message.inbox_id === long.inboxId && e.message.in_reply_to === long.messageId,
    )?.sent_at;
    longOutcome = {
      lines,
      characters: longText.length,
      webhookBytes: Buffer.byteLength(long.body),
      status: ended,
      emails: 0,
      seconds: ((sentAt ? Date.parse(sentAt) : closedAt) - (deliveredAt.get(long.body) ?? startedAt)) / 1000,
    };
  }
  // A straggling duplicate would land after the last expected reply: give it a moment to show.
  await sleep(500);
  const usage = meter.read();

  const entries = await outbox(context);
  const repliesTo = new Map<string, string[]>();
  for (const e of entries) {
    const key = `${e.message.inbox_id}\n${e.message.in_reply_to ?? ''}`;
    repliesTo.set(key, [...(repliesTo.get(key) ?? []), e.sent_at]);
  }
  const latencies: number[] = [];
  let missingReplies = 0;
  let duplicateEmails = 0;
  let lastReply = 0;
  for (const m of ordinary) {
    const sent = repliesTo.get(`${m.inboxId}\n${m.messageId}`) ?? [];
    if (sent.length === 0) missingReplies += 1;
    duplicateEmails += Math.max(0, sent.length - 1);
    const first = sent.map(Date.parse).sort((a, b) => a - b)[0];
    if (first !== undefined) {
      latencies.push(first - (deliveredAt.get(m.body) as number));
      lastReply = Math.max(lastReply, first);
    }
  }
  if (long && longOutcome) {
    longOutcome.emails = (repliesTo.get(`${long.inboxId}\n${long.messageId}`) ?? []).length;
    // Answered once: one email, or an outcome that sends none (a person's hand-off) and no email.
    duplicateEmails += Math.max(0, longOutcome.emails - 1);
    if (longOutcome.status === 'sent' && longOutcome.emails === 0) missingReplies += 1;
  }
  const firstDelivery = Math.min(...deliveredAt.values());
  const run: LongEmailRun = {
    repeat,
    withLongEmail,
    messages: count,
    ackFailures: failures(result),
    latency: summarize(latencies),
    replies: entries.length,
    missingReplies,
    duplicateEmails,
    drainSeconds: (lastReply - firstDelivery) / 1000,
    ...(longOutcome ? { longEmail: longOutcome } : {}),
    cpuMsPerMessage: cpuPer(usage, expected),
    othersBusy: othersBusy(usage),
    loadAverage: loadAverage(),
    timedOut,
  };
  context.log(
    `  ${withLongEmail ? `with the ${lines}-line email` : 'alone'}: the ${count}'s webhook→reply p50 ${run.latency.p50.toFixed(0)} ms ` +
      `p99 ${run.latency.p99.toFixed(0)} ms, replies ${entries.length}/${expected}, missing ${missingReplies}, duplicates ${duplicateEmails}` +
      (longOutcome
        ? `; the long email (${longOutcome.characters} characters, webhook ${Math.round(longOutcome.webhookBytes / 1024)} KiB): ` +
          `${longOutcome.status}, ${longOutcome.emails} email(s), ${longOutcome.seconds.toFixed(1)} s`
        : '') +
      `${run.ackFailures ? `, ack failures ${run.ackFailures}` : ''}${timedOut ? ', TIMED OUT' : ''}`,
  );
  return run;
}

/**
 * Warms the path (JIT, connections, the workflow bundle, Postgres's caches of the help centre) with
 * one message per question, not counted. The end-to-end warm-up's "where is my order" would be
 * handed off here (no article answers it), and a warm-up that waits for replies must get them.
 */
async function warmUp(context: BenchContext, side: Awaited<ReturnType<typeof startOurSide>>): Promise<void> {
  await resetSandbox(context);
  const tag = randomUUID().slice(0, 8);
  const messages: Seeded[] = [];
  for (const [i, question] of QUESTIONS.entries())
    messages.push(
      await seed(context, {
        inboxId: INBOXES[i % INBOXES.length] as string,
        from: `Warm-up ${i} <warm-${tag}-${i}@example.com>`,
        subject: `Warm-up ${tag}-${i}`,
        text: question,
      }),
    );
  await runOpenLoop(
    { origin: side.url, path: WEBHOOK_PATH },
    messages.map((m) => context.signer.sign(m.body)),
    { rate: 5, connections: 4, maxDurationMs: 10_000 },
  );
  const deadline = Date.now() + 30_000;
  while ((await repliesSent(context)) < messages.length && Date.now() < deadline) await sleep(200);
}

/**
 * `options.repeats` pairs, each on a fresh Temporal dev server and a fresh API and worker: the 200
 * alone, then with the long email, the order swapped every other repeat (A B, B A, A B …).
 */
export async function runLongEmail(context: BenchContext): Promise<LongEmailFigures> {
  const db = createDb(context.env.databaseUrl);
  try {
    // The bundled help centre (and the synonyms it was measured with), so retrieval does its real work.
    await syncConfigured(db, {
      KNOWLEDGE_DIR: `${COLLECTION}=${BUNDLED_HELP_CENTRE}`,
      KNOWLEDGE_LANGUAGE: 'english',
      KNOWLEDGE_COLLECTION_LANGUAGES: {},
    });
  } finally {
    await db.end();
  }
  const { messages, lines, windowSeconds } = context.options.longEmail;
  const runs: LongEmailRun[] = [];
  for (let repeat = 0; repeat < context.options.repeats; repeat++) {
    await context.env.freshTemporal();
    const order = repeat % 2 === 0 ? [false, true] : [true, false];
    for (const withLongEmail of order) {
      context.log(
        `long email repeat ${repeat + 1}/${context.options.repeats}: ${messages} messages ${withLongEmail ? `and one of ${lines} lines` : 'alone'}`,
      );
      // A fresh API and worker per run: neither inherits the other's backlog or warm caches.
      const side = await startOurSide(context, {
        env: { KNOWLEDGE_INBOX_COLLECTIONS: JSON.stringify({ '*': [COLLECTION] }) },
      });
      const connection = await Connection.connect({ address: context.env.temporalAddress });
      const client = new Client({ connection, namespace: NAMESPACE });
      try {
        await warmUp(context, side);
        runs.push(await oneRun(context, side, client, repeat, withLongEmail));
      } finally {
        await connection.close();
        await side.stop();
      }
    }
  }
  return { messages, lines, windowSeconds, runs };
}

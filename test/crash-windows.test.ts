import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readFolder, syncCollection } from '../knowledge';
import { buildModelStandIn } from '../sandbox/model/app';
import { ModelStandInControl } from '../sandbox/model/control-client';
import { BUNDLED } from '../scripts/eval';
import type { Failpoint } from '../lib/failpoints';
import { decisionKey, draftKey, INBOUND_MESSAGE_WORKFLOW, type MessageRef, replyKey, ticketKey } from '../contract';
import { OperationInProgressError } from '../activities/operation-store/errors';
import { OperationStore } from '../activities/operation-store/store';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';
import { AppProcess } from './support/app-process';

// Crashes between an effect and its record, with real worker processes killed by SIGKILL at
// named failpoints. After each crash a fresh worker takes over (Temporal notices the dead
// attempt by its heartbeat timeout; the operation's short lease has run out by then).
let h: Harness;
const workers: AppProcess[] = [];
before(async () => {
  h = await Harness.start({ worker: false });
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await h.close();
});

async function startWorker(failpoints: Failpoint[] = [], env: Record<string, string> = {}): Promise<AppProcess> {
  const worker = await AppProcess.startWorker(h, { failpoints, env });
  workers.push(worker);
  return worker;
}

async function newMessage(): Promise<MessageRef> {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `crash-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Crash me',
    text: 'Please answer once.',
  });
  return { inboxId, messageId: inbound.message.message_id };
}

async function operation(key: string) {
  return (
    await h.db.query<{ status: string; result: { text?: string } | null; attempts: number }>(
      'SELECT status, result, attempts FROM operations WHERE operation_key = $1',
      [key],
    )
  ).rows[0];
}

/** Runs one message with a worker that dies at `failpoint`, then lets a healthy worker finish it. */
async function crashThenRecover(failpoint: Failpoint) {
  const crashing = await startWorker([failpoint]);
  const ref = await newMessage();
  const died = await crashing.exited;
  assert.equal(died.signal, 'SIGKILL', `the worker died at ${failpoint}`);
  const afterCrash = {
    outbox: (await h.sandbox.outbox({ inbox_id: ref.inboxId })).length,
    tickets: (await h.ticketsFor(ref)).length,
  };
  const healthy = await startWorker();
  const result = await h.workflowResult(ref);
  await healthy.stop();
  const draftCalls = [crashing, healthy].reduce(
    (n, w) => n + w.logs('drafting reply', { operationKey: draftKey(ref) }).length,
    0,
  );
  return { ref, result, afterCrash, draftCalls };
}

describe('a worker killed between an effect and its record', () => {
  test('after AgentMail accepted the send, before the row was completed → resumed with the same key: one email, the original message id, the stored text', async () => {
    const { ref, result, afterCrash } = await crashThenRecover('reply.after-effect');
    assert.equal(afterCrash.outbox, 1, 'the crash came after the send was committed');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.equal(result.status === 'sent' && result.replyMessageId, outbox[0]!.message.message_id);
    const keys = await h.sandbox.idempotencyKeys();
    assert.equal(keys.filter((k) => k.key === outbox[0]!.idempotency_key).length, 1);
    assert.equal((await operation(draftKey(ref)))?.result?.text, outbox[0]!.message.text);
    assert.equal((await operation(replyKey(ref)))?.attempts, 2, 'the second worker resumed the same operation');
  });

  test('after the reply was recorded, before the activity returned → replayed from the store: one email', async () => {
    const { ref, result, afterCrash } = await crashThenRecover('reply.after-store');
    assert.equal(afterCrash.outbox, 1);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
    assert.equal(result.status === 'sent' && result.replayed, true);
  });

  test('after the model drafted, before the draft was stored → the model runs again; the email carries the stored text', async () => {
    const { ref, draftCalls } = await crashThenRecover('draft.after-effect');
    assert.equal(draftCalls, 2, 'the draft was lost with the crash, so the model was asked again');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.equal((await operation(draftKey(ref)))?.result?.text, outbox[0]!.message.text);
  });

  test('after the draft was stored, before the activity returned → the model does not run again', async () => {
    const { ref, draftCalls } = await crashThenRecover('draft.after-store');
    assert.equal(draftCalls, 1);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });

  test('after the decision was recorded, inside its workflow task (a local activity) → the next worker replays it: one decision, one email', async () => {
    const { ref, result } = await crashThenRecover('decision.after-store');
    assert.equal(result.status, 'sent');
    const decision = await operation(decisionKey(ref));
    assert.equal(decision?.status, 'complete');
    assert.equal(decision?.attempts, 1, 'claimed once: the second worker replayed the stored decision');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });

  test('after the ticket was created, before its record → one ticket', async () => {
    const { ref, result, afterCrash } = await crashThenRecover('ticket.after-effect');
    assert.equal(afterCrash.tickets, 1, 'the crash came after the ticket was created');
    const tickets = await h.ticketsFor(ref);
    assert.equal(tickets.length, 1);
    assert.equal(result.status === 'sent' && result.ticketId, tickets[0]!.ticket_id);
    assert.equal((await operation(ticketKey(ref)))?.status, 'complete');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });
});

describe('a slow attempt that outlives its lease length', () => {
  test('keeps its lease by renewing it while it works: a concurrent run for the same message waits and replays, one email', async () => {
    // The lease (2 s) is far shorter than the sandbox's delay (6 s) inside the send's in-flight
    // window. A second run for the same message (an operator's replay under another id) reaches
    // the send meanwhile: only the renewal keeps it from taking the operation over.
    const worker = await startWorker();
    await h.sandbox.setFaults({ match: { method: 'POST', path: '/reply', count: 1 }, action: 'delay', ms: 6_000 });
    try {
      const ref = await newMessage();
      await eventually(
        async () => ((await operation(replyKey(ref)))?.status === 'processing' ? true : undefined),
        'the first send to be in flight',
      );
      // Past the lease's length, another attempt (a worker that lost track of the first) cannot take
      // the send over: only the renewal keeps the row's lease alive.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const row = await h.db.query<{ request_hash: string }>(
        'SELECT request_hash FROM operations WHERE operation_key = $1',
        [replyKey(ref)],
      );
      await assert.rejects(
        new OperationStore(h.db).claim({
          key: replyKey(ref),
          kind: 'reply',
          requestHash: row.rows[0]!.request_hash,
          ownerToken: 'another-attempt',
          leaseMs: 2_000,
        }),
        OperationInProgressError,
      );
      // A second run of the same message meanwhile waits for the thread's turn, then replays the send.
      const replay = h.client.workflow.execute(INBOUND_MESSAGE_WORKFLOW, {
        workflowId: `replay-${randomUUID()}`,
        taskQueue: h.taskQueue,
        args: [ref],
      });
      const [first, second] = await Promise.all([h.resultOf(ref), replay]);
      assert.equal(
        first.status === 'sent' && second.status === 'sent' && first.replyMessageId === second.replyMessageId,
        true,
        JSON.stringify({ first, second }),
      );
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
      assert.equal(
        (await operation(replyKey(ref)))?.attempts,
        1,
        'the renewed lease kept the first attempt exclusive; nothing took over',
      );
    } finally {
      await h.sandbox.clearFaults();
      await worker.stop();
    }
  });
});

describe('drafting with retrieval, a worker killed around the draft, the knowledge re-synced before the next worker', () => {
  // Real worker processes drafting through the AI SDK against the model stand-in (calls counted
  // there), with a knowledge base for the message's inbox; between the crash and the recovery an
  // article the message retrieves is edited and synced, so the retrieval — and the draft's request — change.
  let model: ModelStandInControl;
  let closeModel: () => Promise<unknown>;
  const helpCentre = mkdtempSync(path.join(tmpdir(), 'help-centre-'));
  const collection = `kb-crash-${randomUUID().slice(0, 8)}`;
  const sync = async () =>
    syncCollection(h.db, { collection, language: 'english', documents: (await readFolder(helpCentre)).documents });
  before(async () => {
    const standIn = buildModelStandIn();
    await standIn.app.listen({ port: 0, host: '127.0.0.1' });
    closeModel = () => standIn.app.close();
    model = new ModelStandInControl(`http://127.0.0.1:${(standIn.app.server.address() as AddressInfo).port}`);
    cpSync(BUNDLED.knowledge, helpCentre, { recursive: true });
    await sync();
  });
  after(async () => {
    await closeModel();
    rmSync(helpCentre, { recursive: true, force: true });
  });

  async function crashResyncRecover(failpoint: Failpoint) {
    const inboxId = h.newInbox('kb');
    const env = {
      DRAFT_PROVIDER: 'openai-compatible',
      DRAFT_BASE_URL: model.apiUrl,
      DRAFT_MODEL: 'stand-in',
      KNOWLEDGE_INBOX_COLLECTIONS: JSON.stringify({ [inboxId]: [collection] }),
    };
    const crashing = await startWorker([failpoint], env);
    const marker = `CRASH-${randomUUID()}`;
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `crash-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Shipping',
      text: `Do you ship to Norway? ${marker}`,
    });
    const ref = { inboxId, messageId: inbound.message.message_id };
    assert.equal((await crashing.exited).signal, 'SIGKILL', `the worker died at ${failpoint}`);
    const hashBefore = (
      await h.db.query('SELECT request_hash FROM operations WHERE operation_key = $1', [draftKey(ref)])
    ).rows[0]?.request_hash as string;
    writeFileSync(
      path.join(helpCentre, 'shipping/countries.md'),
      `# Countries we ship to\nWe ship to the UK, the EU, Norway, Switzerland and Iceland (edited ${marker.slice(-6)}).\n`,
    );
    assert.equal((await sync()).changed, 1);
    const healthy = await startWorker([], env);
    const result = await h.workflowResult(ref);
    await healthy.stop();
    const hashAfter = (
      await h.db.query('SELECT request_hash FROM operations WHERE operation_key = $1', [draftKey(ref)])
    ).rows[0]?.request_hash as string;
    return { ref, result, calls: (await model.calls({ contains: marker })).length, hashBefore, hashAfter };
  }

  test('after the draft was stored → the stored draft is replayed under its first request: one model call, one email', async () => {
    const { ref, result, calls, hashBefore, hashAfter } = await crashResyncRecover('draft.after-store');
    assert.equal(result.status, 'sent');
    assert.equal(calls, 1, 'one model call for the message');
    assert.equal(hashAfter, hashBefore, 'the stored draft kept its request');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1);
    assert.equal((await operation(draftKey(ref)))?.result?.text, outbox[0]!.message.text);
  });

  test('after the model drafted, before the draft was stored → drafted afresh with the new knowledge: the lost call and one more, one email', async () => {
    const { ref, result, calls, hashBefore, hashAfter } = await crashResyncRecover('draft.after-effect');
    assert.equal(result.status, 'sent');
    assert.equal(calls, 2, 'the first answer died with the worker before it was stored');
    assert.notEqual(hashAfter, hashBefore, 'the unfinished row gave way to the request under the new knowledge');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1);
  });
});

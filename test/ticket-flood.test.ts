import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { foldSkippedTicket } from '../activities/ticket/skipped-fold';
import type { MessageRef } from '../contract';
import { skippedTicketsFolded } from '../lib/metrics';
import { Harness } from './support/harness';

// Issue 18 point 4: with TICKET_FOR_SKIPPED on, skipped mail cannot flood the help desk. An inbox
// opens one ticket for skipped mail per 24 h (by default); later skipped messages are counted on
// it. Robots, lists and bounces open none unless TICKET_FOR_ROBOTS says so. Real parts throughout:
// the sandbox delivers signed webhooks, the workflows run on the test's Temporal, tickets in Postgres.
const BUDGET = 5;
let h: Harness;
before(async () => {
  h = await Harness.start({ replyBudgetPerSender: BUDGET, ticketForSkipped: true });
});
after(() => h?.close());

const foldedSoFar = async () => (await skippedTicketsFolded.get()).values.reduce((sum, value) => sum + value.value, 0);

/** The inbox's tickets (one per thread), each with its opening message's internal notes: a skip's reason. */
async function ticketsOf(inboxId: string) {
  return (
    await h.db.query<{ message_id: string; note: string }>(
      `SELECT t.message_id,
              coalesce((SELECT string_agg(c.note, E'\n' ORDER BY c.created_at) FROM ticket_comments c
                 WHERE c.ticket_id = t.ticket_id AND c.message_id = t.message_id AND c.kind = 'note'), '') AS note
         FROM tickets t WHERE t.inbox_id = $1 ORDER BY t.created_at`,
      [inboxId],
    )
  ).rows;
}

async function arrive(inboxId: string, fields: { from: string } & Record<string, unknown>): Promise<MessageRef> {
  const inbound = await h.sandbox.inbound({ inbox_id: inboxId, subject: 'Order', text: 'Where is it?', ...fields });
  return { inboxId, messageId: inbound.message.message_id };
}

describe('tickets for skipped mail', () => {
  test(
    '200 messages from one sender, budget 5 → the 5 answered messages’ tickets and one more for the 195 skipped',
    { timeout: 170_000 },
    async () => {
      // Prepare
      const inboxId = h.newInbox();
      const from = `flood-${randomUUID().slice(0, 8)}@customer.example`;
      const foldedBefore = await foldedSoFar();

      // Act: 200 arrive, in bursts of 20 (the webhooks and the workflows overlap)
      const refs: MessageRef[] = [];
      for (let burst = 0; burst < 10; burst += 1)
        refs.push(...(await Promise.all(Array.from({ length: 20 }, () => arrive(inboxId, { from })))));
      const results = [];
      for (const ref of refs) results.push(await h.resultOf(ref, 120_000));

      // Assess
      const sent = results.filter((r) => r.status === 'sent');
      const skipped = results.filter((r) => r.status === 'skipped');
      assert.equal(sent.length, BUDGET);
      assert.equal(skipped.length, 200 - BUDGET);
      assert.ok(skipped.every((r) => r.status === 'skipped' && r.reason === 'sender-budget-exceeded'));
      const tickets = await ticketsOf(inboxId);
      // An answered message's thread ticket has no internal note; a skipped one's says why.
      const answeredTickets = tickets.filter((t) => t.note === '');
      const skippedTickets = tickets.filter((t) => t.note.startsWith('not answered automatically'));
      assert.equal(answeredTickets.length, BUDGET, 'each answered message has its ticket');
      assert.equal(skippedTickets.length, 1, `one ticket for the skipped, not ${skippedTickets.length}`);
      assert.equal(tickets.length, BUDGET + 1);
      const withTicket = skipped.filter((r) => r.ticketId !== null);
      assert.equal(withTicket.length, 1, 'one skipped run names the ticket; the others were counted on it');

      const counted = await h.db.query<{ opened: boolean; n: number }>(
        'SELECT opened, count(*)::int AS n FROM skipped_ticket_folds WHERE inbox_id = $1 GROUP BY opened ORDER BY opened',
        [inboxId],
      );
      assert.deepEqual(
        counted.rows.map((r) => [r.opened, r.n]),
        [
          [false, 194],
          [true, 1],
        ],
      );
      assert.equal((await foldedSoFar()) - foldedBefore, 194, 'the metric counts what was folded');
    },
  );

  test('robots, lists and bounces open no ticket for skipped mail (TICKET_FOR_SKIPPED on, TICKET_FOR_ROBOTS off)', async () => {
    const inboxId = h.newInbox();
    const robots = await Promise.all([
      arrive(inboxId, { from: 'no_reply@shop.example' }),
      arrive(inboxId, {
        from: `ada-${randomUUID().slice(0, 6)}@customer.example`,
        headers: { 'List-Id': '<n.example>' },
      }),
      arrive(inboxId, { from: `mta-${randomUUID().slice(0, 6)}@mx.example`, headers: { 'Return-Path': '<>' } }),
      arrive(inboxId, { from: `ada-${randomUUID().slice(0, 6)}@customer.example`, headers: { Precedence: 'bulk' } }),
    ]);
    for (const ref of robots) {
      const result = await h.resultOf(ref);
      assert.equal(result.status, 'skipped');
      assert.equal(result.status === 'skipped' && result.ticketId, null);
    }
    assert.deepEqual(await ticketsOf(inboxId), []);
  });

  test('TICKET_FOR_ROBOTS=true: a robot gets its ticket, within the same per-inbox bound', async () => {
    const robotsWanted = await Harness.start({ ticketForSkipped: true, ticketForRobots: true });
    try {
      const inboxId = robotsWanted.newInbox();
      const refs: MessageRef[] = [];
      for (let i = 0; i < 3; i += 1) {
        const inbound = await robotsWanted.sandbox.inbound({
          inbox_id: inboxId,
          from: `notifications+${i}@app.example`,
          subject: 'Build failed',
          text: 'Build 1234 failed',
        });
        refs.push({ inboxId, messageId: inbound.message.message_id });
      }
      const results = [];
      for (const ref of refs) results.push(await robotsWanted.resultOf(ref));
      assert.deepEqual(
        results.map((r) => r.status === 'skipped' && r.reason),
        ['robot-sender', 'robot-sender', 'robot-sender'],
      );
      const tickets = await robotsWanted.db.query('SELECT 1 FROM tickets WHERE inbox_id = $1', [inboxId]);
      assert.equal(tickets.rowCount, 1, 'one ticket, the others counted on it');
    } finally {
      await robotsWanted.close();
    }
  });

  test('messages a person must answer (too old) keep a ticket each, however many', async () => {
    const inboxId = h.newInbox();
    const old = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000).toISOString();
    const refs = await Promise.all(
      Array.from({ length: 3 }, () =>
        arrive(inboxId, { from: `ada-${randomUUID().slice(0, 6)}@customer.example`, timestamp: old }),
      ),
    );
    for (const ref of refs) assert.equal((await h.resultOf(ref)).status, 'skipped');
    assert.equal((await ticketsOf(inboxId)).length, 3);
  });
});

describe('the fold rule (activities/ticket/skipped-fold.ts) on Postgres', () => {
  const limits = { perWindow: 2, windowMs: 60_000 };
  const message = (inboxId: string, n: number) => ({ ticketKey: `${inboxId}/m${n}/ticket/v1`, inboxId, reason: 'x' });

  test('N concurrent skipped messages of one inbox: exactly perWindow open a ticket; a retry gets its first answer', async () => {
    const inboxId = `fold-${randomUUID()}`;
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, n) => foldSkippedTicket(h.db, message(inboxId, n), limits)),
    );
    assert.equal(outcomes.filter((o) => !o.folded).length, 2);
    const retried = await Promise.all(
      Array.from({ length: 30 }, (_, n) => foldSkippedTicket(h.db, message(inboxId, n), limits)),
    );
    assert.deepEqual(
      retried.map((o) => o.folded),
      outcomes.map((o) => o.folded),
      'a retried attempt is answered as the first was',
    );
    const folded = await h.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM skipped_ticket_folds WHERE inbox_id = $1 AND NOT opened',
      [inboxId],
    );
    assert.equal(folded.rows[0]?.n, 28, 'a retry is not counted twice');
  });

  test('past the window the next skipped message opens a new ticket; another inbox is not affected', async () => {
    const inboxId = `fold-${randomUUID()}`;
    const one = { perWindow: 1, windowMs: 60_000 };
    assert.deepEqual(await foldSkippedTicket(h.db, message(inboxId, 1), one), { folded: false });
    const second = await foldSkippedTicket(h.db, message(inboxId, 2), one);
    assert.deepEqual(second, { folded: true, into: message(inboxId, 1).ticketKey, count: 1 });
    assert.deepEqual(await foldSkippedTicket(h.db, message(`other-${inboxId}`, 1), one), { folded: false });
    // The window's start moves back: the ticket was opened more than a window ago.
    await h.db.query("UPDATE skipped_ticket_folds SET at = now() - interval '2 minutes' WHERE inbox_id = $1", [
      inboxId,
    ]);
    assert.deepEqual(await foldSkippedTicket(h.db, message(inboxId, 3), one), { folded: false });
    const fourth = await foldSkippedTicket(h.db, message(inboxId, 4), one);
    assert.deepEqual(fourth, { folded: true, into: message(inboxId, 3).ticketKey, count: 1 });
  });
});

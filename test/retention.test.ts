import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { pruneExpiredRecords, type PruneResult } from '../activities/upkeep/retention';
import { ensureSchedules, scheduleIds } from '../worker/schedules';
import { Harness } from './support/harness';
import { eventually } from './support/temporal';

// Retention on real Postgres and Temporal, with back-dated rows: the schedule's workflow deletes
// what has done its job — webhook event ids after 7 days, the reply budget's rows after 48 h,
// operations after OPERATION_RETENTION_DAYS — in bounded batches, and never a ticket.
let h: Harness;
before(async () => {
  h = await Harness.start();
});
after(() => h.close());

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const hash = (n: number) => n.toString(16).padStart(64, '0');

/** Rows aged `ageMs`, tagged with a fresh run id so this file sees only its own. */
async function seed(
  run: string,
  ages: { events: number[]; operations: number[]; replyReservations: number[]; tickets: number[] },
) {
  const ago = (ms: number) => new Date(Date.now() - ms);
  for (const [i, age] of ages.events.entries()) {
    await h.db.query(
      `INSERT INTO inbound_events (event_id, event_type, outcome, received_at) VALUES ($1, 'message.received', 'queued', $2)`,
      [`evt_${run}_${i}`, ago(age)],
    );
  }
  for (const [i, age] of ages.operations.entries()) {
    await h.db.query(
      `INSERT INTO operations (operation_key, kind, request_hash, status, result, first_attempt_at, created_at, updated_at)
       VALUES ($1, 'draft', $2, 'complete', '{}', $3, $3, $3)`,
      [`${run}/op/${i}`, hash(i), ago(age)],
    );
  }
  for (const [i, age] of ages.replyReservations.entries()) {
    await h.db.query(
      `INSERT INTO reply_reservations (reply_key, inbox_id, recipient_hash, reserved_at) VALUES ($1, $2, $3, $4)`,
      [`${run}/reply/${i}`, run, hash(i), ago(age)],
    );
  }
  for (const [i, age] of ages.tickets.entries()) {
    await h.db.query(
      `INSERT INTO tickets (ticket_id, operation_key, inbox_id, message_id, created_at) VALUES ($1, $2, $3, $4, $5)`,
      [`t_${run}_${i}`, `${run}/op/${i}`, run, `m${i}`, ago(age)],
    );
  }
}

async function remaining(run: string) {
  const count = async (sql: string, value: string) =>
    Number((await h.db.query<{ n: string }>(sql, [value])).rows[0]?.n);
  return {
    events: await count(`SELECT count(*) AS n FROM inbound_events WHERE event_id LIKE $1`, `evt_${run}_%`),
    operations: await count(`SELECT count(*) AS n FROM operations WHERE operation_key LIKE $1`, `${run}/op/%`),
    replyReservations: await count(`SELECT count(*) AS n FROM reply_reservations WHERE inbox_id = $1`, run),
    tickets: await count(`SELECT count(*) AS n FROM tickets WHERE inbox_id = $1`, run),
  };
}

describe('retention', () => {
  test('intake rows go 7 days after their workflow started; an unstarted row stays however old; a cursor of an inbox silent past OPERATION_RETENTION_DAYS goes', async () => {
    // Prepare
    const run = randomUUID().slice(0, 8);
    const ago = (ms: number) => new Date(Date.now() - ms);
    const rows: Array<[string, Date, Date | null]> = [
      [`${run}-started-8d`, ago(9 * DAY), ago(8 * DAY)],
      [`${run}-started-6d`, ago(6 * DAY), ago(6 * DAY)],
      [`${run}-unstarted-30d`, ago(30 * DAY), null],
    ];
    for (const [id, acceptedAt, startedAt] of rows)
      await h.db.query(
        `INSERT INTO intake (workflow_id, task_queue, inbox_id, message_id, accepted_at, started_at)
         VALUES ($1, 'retention-test', $2, $1, $3, $4)`,
        [id, run, acceptedAt, startedAt],
      );
    await h.db.query(`INSERT INTO inbox_cursors (inbox_id, newest_message_at) VALUES ($1, $2), ($3, $4)`, [
      `${run}-silent@x`,
      ago(31 * DAY),
      `${run}-active@x`,
      ago(29 * DAY),
    ]);

    // Act
    const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
    const result: PruneResult = await env.run(pruneExpiredRecords, {
      db: h.db,
      config: { OPERATION_RETENTION_DAYS: 30 },
    });

    // Assess
    const left = await h.db.query<{ workflow_id: string }>(
      'SELECT workflow_id FROM intake WHERE inbox_id = $1 ORDER BY workflow_id',
      [run],
    );
    assert.deepEqual(
      left.rows.map((r) => r.workflow_id),
      [`${run}-started-6d`, `${run}-unstarted-30d`],
    );
    const cursors = await h.db.query<{ inbox_id: string }>(
      'SELECT inbox_id FROM inbox_cursors WHERE inbox_id LIKE $1',
      [`${run}-%`],
    );
    assert.deepEqual(
      cursors.rows.map((r) => r.inbox_id),
      [`${run}-active@x`],
    );
    assert.ok(result.intake >= 1 && result.inboxCursors >= 1, JSON.stringify(result));
  });

  test("a thread's turn row goes once nobody held or waited in it for OPERATION_RETENTION_DAYS; a turn in progress stays however old", async () => {
    // Prepare: an idle row past the horizon, an idle one within it, and one whose holder awaits approval for 40 days
    const run = randomUUID().slice(0, 8);
    const ago = (ms: number) => new Date(Date.now() - ms);
    const idle = { holder: null, waiting: [], answered: {} };
    const holder = { workflowId: 'w', runId: 'r', messageId: 'm', covers: ['m'], sender: 's', timestampMs: 0 };
    const holding = { holder, waiting: [], answered: {} };
    for (const [key, state, at] of [
      [`${run}-idle-31d`, idle, ago(31 * DAY)],
      [`${run}-idle-29d`, idle, ago(29 * DAY)],
      [`${run}-holding`, holding, ago(40 * DAY)],
    ] as const)
      await h.db.query(`INSERT INTO thread_turns (thread_key, state, updated_at) VALUES ($1, $2, $3)`, [
        key,
        state,
        at,
      ]);

    // Act
    const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
    const result: PruneResult = await env.run(pruneExpiredRecords, {
      db: h.db,
      config: { OPERATION_RETENTION_DAYS: 30 },
    });

    // Assess
    const left = await h.db.query<{ thread_key: string }>(
      'SELECT thread_key FROM thread_turns WHERE thread_key LIKE $1 ORDER BY thread_key',
      [`${run}-%`],
    );
    assert.deepEqual(
      left.rows.map((r) => r.thread_key),
      [`${run}-holding`, `${run}-idle-29d`],
    );
    assert.ok(result.threadTurns >= 1, JSON.stringify(result));
  });

  test('the workflow prunes events past 7 days, budget rows past 48 h, operations past 90 days, in batches; younger rows and every ticket stay', async () => {
    // Prepare: 5 expired events (3 batches of 2), one just young enough of each kind.
    const run = randomUUID().slice(0, 8);
    await seed(run, {
      events: [8 * DAY, 9 * DAY, 10 * DAY, 30 * DAY, 7 * DAY + HOUR, 6 * DAY],
      operations: [91 * DAY, 200 * DAY, 89 * DAY],
      replyReservations: [49 * HOUR, 10 * DAY, 47 * HOUR],
      tickets: [400 * DAY],
    });

    // Act
    const result: PruneResult = await h.client.workflow.execute('retentionWorkflow', {
      taskQueue: h.taskQueue,
      workflowId: `retention-${randomUUID()}`,
      args: [{ batchSize: 2 }],
    });

    // Assess
    assert.deepEqual(await remaining(run), { events: 1, operations: 1, replyReservations: 1, tickets: 1 });
    assert.ok(
      result.inboundEvents >= 5 && result.operations >= 2 && result.replyReservations >= 2,
      JSON.stringify(result),
    );
    assert.equal(
      (await h.db.query(`SELECT 1 FROM inbound_events WHERE event_id = $1`, [`evt_${run}_5`])).rowCount,
      1,
      'the 6-day-old event id stays',
    );
  });

  test('OPERATION_RETENTION_DAYS sets the operations horizon; each DELETE takes one bounded batch, with a heartbeat after it', async () => {
    const run = randomUUID().slice(0, 8);
    await seed(run, {
      events: [8 * DAY, 8 * DAY, 8 * DAY, 8 * DAY, 8 * DAY],
      operations: [31 * DAY, 29 * DAY],
      replyReservations: [],
      tickets: [],
    });
    const env = new MockActivityEnvironment(undefined, { logger: new DefaultLogger('WARN') });
    const heartbeats: PruneResult[] = [];
    env.on('heartbeat', (details: PruneResult) => heartbeats.push({ ...details }));
    await env.run(pruneExpiredRecords, { db: h.db, config: { OPERATION_RETENTION_DAYS: 30 } }, { batchSize: 2 });
    assert.deepEqual(await remaining(run), { events: 0, operations: 1, replyReservations: 0, tickets: 0 });
    const eventProgress = [...new Set(heartbeats.map((beat) => beat.inboundEvents))];
    assert.deepEqual(eventProgress.slice(0, 3), [2, 4, 5], 'five expired events go in batches of 2, 2, 1');
  });

  test('the retention schedule, triggered, runs the workflow', async () => {
    const run = randomUUID().slice(0, 8);
    await seed(run, { events: [8 * DAY], operations: [], replyReservations: [], tickets: [] });
    const ids = scheduleIds(h.taskQueue);
    try {
      await ensureSchedules(h.client, h.taskQueue);
      const handle = h.client.schedule.getHandle(ids.retention);
      await handle.trigger();
      const workflowId = await eventually(
        async () => (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId,
        'the schedule to start retention',
      );
      const result: PruneResult = await h.client.workflow.getHandle(workflowId).result();
      assert.ok(result.inboundEvents >= 1);
      assert.equal((await remaining(run)).events, 0);
    } finally {
      for (const id of Object.values(ids))
        await h.client.schedule
          .getHandle(id)
          .delete()
          .catch(() => undefined);
    }
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentMailClient } from 'agentmail';
import type { Client } from '@temporalio/client';
import { mailboxOf } from '../activities/agentmail/mailbox';
import { eraseRehearsedMessages } from '../activities/rehearsal/store';
import { emailAddress } from '../activities/agentmail/reads';
import { threadTicketKey } from '../contract';
import type { Db } from '../lib/db';
import { failpoint } from '../lib/failpoints';
import { addressHash, sha256Hex } from '../lib/hashing';
import { allInboxes, findMessages, type ErasurePlan } from './find-messages';
import { checkHistories, needlesOf, type HistoryCheck } from './history-check';

/**
 * Forgetting a customer (issue 36; docs/privacy.md): every text we hold of their messages is
 * erased, each erased operation is left as a content-free tombstone (its key, kind, status and the
 * time of erasure), and a receipt says what was erased where, and what could not be and why.
 *
 * The order is what keeps exactly-once through it:
 *  1. the plan (the messages found, ids only) is written first, so a run killed half-way is
 *     completed by the next from the same list even once AgentMail's copy is gone;
 *  2. the messages' key prefixes and workflow IDs are tombstoned next: from that commit on, no
 *     claim of any of their operations succeeds (a late webhook, a catch-up, a watchdog, a rerun:
 *     `Erased`), no effect begins, and the intake refuses them as new work;
 *  3. then the content goes, store by store; an effect already under way (an email being sent) is
 *     waited for, never raced, and the receipt says it happened before the erasure;
 *  4. open runs are ended, Temporal's histories checked, AgentMail's copy deleted.
 * Every step is idempotent: the same erasure run twice (or after a crash) ends with one receipt.
 */

export interface EraseRequest {
  address: string;
  /**
   * A new request after an earlier erasure of the same mailbox and inboxes finished (they wrote
   * again since): a new erasure with its own receipt, instead of the first receipt. An unfinished
   * one of the same round is resumed, as always.
   */
  again?: boolean | undefined;
  /** Only these inboxes; absent: every inbox of the organisation. */
  inboxes?: string[] | undefined;
  dryRun?: boolean | undefined;
  /** Also hold the mailbox's new messages for a person (skipped, with a ticket). */
  block?: boolean | undefined;
  /** Who asked (the operator's name, or `admin-api`): on the receipt. */
  requestedBy: string;
}

export interface ErasureDeps {
  db: Db;
  agentmail: AgentMailClient;
  /** Temporal, to end open runs and check histories; absent: both are listed as not done. */
  temporal?: Client | undefined;
  /** Which help desk holds tickets: Postgres's are emptied here; Zendesk's deleted through `zendesk`, else listed. */
  ticketProvider: 'postgres' | 'zendesk';
  /** Zendesk's deletion (activities/ticket/zendesk-tickets.ts); absent: the tickets are listed for deletion by hand. */
  zendesk?: { deleteTicket(ticketId: string): Promise<'deleted' | 'gone'> } | undefined;
  /** How long an effect under way (a send) is waited for before the run stops and asks to be run again. */
  inFlightWaitMs?: number | undefined;
}

export interface ReceiptEntry {
  /** Where: `postgres:operations`, `agentmail`, `temporal`, `zendesk`, … */
  where: string;
  what: string;
  count: number;
}

export interface NotErased {
  where: string;
  what: string;
  why: string;
  /** Ids an operator can act on (Zendesk ticket ids, AgentMail message ids, workflow ids). */
  ids?: string[];
}

/** The receipt: ids, counts and hashes, never the erased content nor the address. */
export interface Receipt {
  erasureId: string;
  /** sha256 of the mailbox (activities/agentmail/mailbox.ts), as the reply budget hashes it. */
  mailboxHash: string;
  inboxes: string[] | 'all';
  requestedBy: string;
  startedAt: string;
  completedAt: string | null;
  blocked: boolean;
  found: { messages: number; threads: number; ourReplies: number; inboxes: number };
  /** The messages erased (ids): what the customer can be told about. */
  messages: Array<{ inboxId: string; messageId: string; workflowId: string }>;
  erased: ReceiptEntry[];
  /** Replies that went out before the erasure (their effect had happened; the email is with the customer). */
  sentBeforeErasure: Array<{ inboxId: string; messageId: string; operationKey: string }>;
  temporal: { note: string; workflows: HistoryCheck[]; ended: string[] };
  notErased: NotErased[];
}

export interface ErasureOutcome {
  receipt: Receipt;
  /** True when this erasure had completed before: the first receipt, unchanged. */
  repeated: boolean;
  dryRun: boolean;
}

const HISTORY_NOTE =
  "Temporal's history holds ids, operation keys and statuses by design, never a message's or a reply's text; " +
  'search attributes hold our inbox and message/thread ids, never the customer address. Each workflow below was checked.';

/** The same mailbox and scope is the same erasure: it reports its first receipt. */
export function erasureIdOf(mailboxHash: string, inboxes: string[] | undefined, round = 1): string {
  const scope = inboxes ? [...new Set(inboxes)].sort() : '*';
  return sha256Hex(
    JSON.stringify(round === 1 ? ['erasure', mailboxHash, scope] : ['erasure', mailboxHash, scope, round]),
  );
}

/** `again`: the first round of this mailbox and scope not finished yet (a new one after the last finished). */
async function roundOf(db: Db, mailboxHash: string, inboxes: string[] | undefined, again: boolean): Promise<string> {
  let round = 1;
  for (;;) {
    const id = erasureIdOf(mailboxHash, inboxes, round);
    const row = again ? await erasureRow(db, id) : undefined;
    if (!row?.completed_at) return id;
    round += 1;
  }
}

interface ErasureRow {
  erasure_id: string;
  started_at: Date;
  completed_at: Date | null;
  plan: ErasurePlan | null;
  receipt: Receipt | null;
}

export async function erase(deps: ErasureDeps, request: EraseRequest): Promise<ErasureOutcome> {
  const address = emailAddress(request.address);
  if (!/^[^\s@]+@[^\s@]+$/.test(address))
    throw new Error(`--address must be one email address (got something else); e.g. --address ada@example.com`);
  const mailboxHash = addressHash(mailboxOf(address));
  const erasureId = await roundOf(deps.db, mailboxHash, request.inboxes, Boolean(request.again));
  const earlier = await erasureRow(deps.db, erasureId);
  if (earlier?.completed_at && earlier.receipt) return { receipt: earlier.receipt, repeated: true, dryRun: false };

  const inboxes = request.inboxes ? [...new Set(request.inboxes)].sort() : await allInboxes(deps.agentmail);
  // The plan of an interrupted run is the plan: AgentMail's copy may be gone already.
  const plan = earlier?.plan ?? (await findMessages(deps.agentmail, address, inboxes));
  if (request.dryRun)
    return { receipt: await dryRunReceipt(deps, request, erasureId, mailboxHash, plan), repeated: false, dryRun: true };

  // Looked for in Temporal's histories; held in memory only, never written anywhere.
  const needles = [mailboxOf(address), address, ...(await textsOf(deps, plan))];

  const started = await deps.db.query<{ started_at: Date }>(
    `INSERT INTO erasures (erasure_id, mailbox_hash, inboxes, requested_by, block, plan)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (erasure_id) DO UPDATE SET plan = COALESCE(erasures.plan, EXCLUDED.plan)
     RETURNING started_at`,
    [
      erasureId,
      mailboxHash,
      request.inboxes ?? null,
      request.requestedBy,
      Boolean(request.block),
      JSON.stringify(plan),
    ],
  );
  const receipt: Receipt = {
    erasureId,
    mailboxHash,
    inboxes: request.inboxes ? inboxes : 'all',
    requestedBy: request.requestedBy,
    startedAt: started.rows[0]!.started_at.toISOString(),
    completedAt: null,
    blocked: Boolean(request.block),
    found: {
      messages: plan.messages.length,
      threads: plan.threads.length,
      ourReplies: plan.ourReplies.length,
      inboxes: inboxes.length,
    },
    messages: plan.messages.map(({ inboxId, messageId, workflowId }) => ({ inboxId, messageId, workflowId })),
    erased: [],
    sentBeforeErasure: [],
    temporal: { note: HISTORY_NOTE, workflows: [], ended: [] },
    notErased: [],
  };
  const note = (entry: ReceiptEntry) => receipt.erased.push(entry);

  // 2. Tombstones first: from here on nothing of these messages runs again.
  note({
    where: 'postgres:erased_messages',
    what: 'messages tombstoned (their operation keys and workflow ids refused from now on)',
    count: await tombstoneMessages(deps.db, erasureId, plan),
  });
  failpoint('erasure.after-tombstones');
  note({
    where: 'postgres:intake',
    what: 'unstarted jobs withdrawn (ids only; started ones stay as the record of hand-over)',
    count: await withdrawUnstarted(deps.db, plan),
  });

  // 3. The content, store by store.
  const tickets = await helpdeskTickets(deps.db, erasureId, plan);
  const operations = await eraseOperations(deps, plan);
  await effectsBeforeErasure(deps.db, plan, receipt);
  note({
    where: 'postgres:operations',
    what: 'operations made tombstones (drafts, approved texts, edits, reviews, notifications, tickets, decisions): key, kind and status kept, content removed',
    count: operations,
  });
  note({
    where: 'postgres:rehearsal_results',
    what: 'rehearsed results of their messages deleted (their words, the drafts, our answers beside them)',
    count: await eraseRehearsedMessages(deps.db, plan.messages),
  });
  if (deps.ticketProvider === 'postgres') {
    const scrubbed = await scrubPostgresTickets(deps.db, plan);
    note({
      where: 'postgres:tickets',
      what: 'tickets of their threads emptied (subject, note), closed',
      count: scrubbed.tickets,
    });
    note({
      where: 'postgres:ticket_comments',
      what: 'comments and notes on those tickets emptied',
      count: scrubbed.comments,
    });
  } else if (deps.zendesk && tickets.own.length > 0) {
    const zendesk = deps.zendesk;
    const failed: string[] = [];
    let deleted = 0;
    for (const id of tickets.own) {
      const outcome = await zendesk.deleteTicket(id).catch(() => 'failed' as const);
      if (outcome === 'deleted') deleted += 1;
      if (outcome === 'failed') failed.push(id);
    }
    note({ where: 'zendesk', what: 'tickets of their threads deleted permanently', count: deleted });
    if (failed.length > 0)
      receipt.notErased.push({
        where: 'zendesk',
        what: `${failed.length} ticket(s) Zendesk did not delete`,
        why: 'Zendesk refused or was unreachable; run the same erasure again',
        ids: failed,
      });
  } else if (tickets.own.length > 0) {
    receipt.notErased.push({
      where: 'zendesk',
      what: `${tickets.own.length} ticket(s) of their threads`,
      why: 'no Zendesk credentials were given: delete them in Zendesk (DELETE /api/v2/tickets/{id}, then DELETE /api/v2/deleted_tickets/{id})',
      ids: tickets.own,
    });
  }
  if (deps.ticketProvider === 'zendesk' && tickets.shared.length > 0)
    receipt.notErased.push({
      where: 'zendesk',
      what: `${tickets.shared.length} ticket(s) of threads shared with other people`,
      why: "not deleted whole: redact their comments in Zendesk (PUT /api/v2/comment_redactions/{comment id}) so the others' stay",
      ids: tickets.shared,
    });
  note({
    where: 'postgres:reply_reservations',
    what: "the reply budget's address hashes of their replies replaced by unlinkable ones",
    count: await scrubBudget(deps.db, mailboxHash, plan, request.inboxes),
  });
  receipt.notErased.push({
    where: 'postgres:review_audit',
    what: 'verdict facts (who approved or rejected which revision, when)',
    why: 'kept on purpose: ids and the verdict only, no text and no address (the audit of what went out)',
  });

  // 4. Temporal: end what is still open (it would wait for a verdict on a text that is gone), check histories.
  if (deps.temporal) {
    receipt.temporal.ended = await endOpenRuns(deps.temporal, plan);
    receipt.temporal.workflows = await checkHistories(
      deps.temporal,
      plan.messages.map((m) => m.workflowId),
      needlesOf(needles).concat(needles.slice(0, 2)),
    );
    const holding = receipt.temporal.workflows.filter((w) => w.holdsErasedText).map((w) => w.workflowId);
    if (holding.length > 0)
      receipt.notErased.push({
        where: 'temporal',
        what: `${holding.length} workflow histories hold erased text (a reviewer's edit travels in the review Update)`,
        why: "kept until the namespace's retention; delete the executions (temporal workflow delete --workflow-id …) to remove them sooner",
        ids: holding,
      });
  } else {
    receipt.notErased.push({
      where: 'temporal',
      what: 'open runs not ended, histories not checked',
      why: 'no Temporal connection was given',
    });
  }

  // AgentMail's own copy: its API deletes threads and messages (permanently).
  const agentmail = await deleteAtAgentMail(deps.agentmail, plan);
  note({
    where: 'agentmail',
    what: 'threads deleted (every message in them theirs or ours)',
    count: agentmail.threads,
  });
  note({
    where: 'agentmail',
    what: 'messages deleted one by one (in threads shared with others)',
    count: agentmail.messages,
  });
  if (agentmail.failed.length > 0)
    receipt.notErased.push({
      where: 'agentmail',
      what: 'messages or threads AgentMail did not delete',
      why: 'AgentMail refused or was unreachable; run the same erasure again',
      ids: agentmail.failed,
    });

  receipt.notErased.push(
    {
      where: 'backups',
      what: 'Postgres backups and replicas taken before the erasure',
      why: 'outside replyonce: they age out on your backup schedule',
    },
    {
      where: 'model provider',
      what: 'the texts sent to the model to draft replies',
      why: 'kept by the provider per its own retention (replyonce cannot reach it)',
    },
  );
  if (request.block) {
    await deps.db.query(
      `INSERT INTO blocked_mailboxes (mailbox_hash, erasure_id) VALUES ($1, $2) ON CONFLICT (mailbox_hash) DO NOTHING`,
      [mailboxHash, erasureId],
    );
    note({
      where: 'postgres:blocked_mailboxes',
      what: 'mailbox blocked: new messages are held for a person',
      count: 1,
    });
  }

  const done = await deps.db.query<{ completed_at: Date }>(
    `UPDATE erasures SET completed_at = COALESCE(completed_at, now()) WHERE erasure_id = $1 RETURNING completed_at`,
    [erasureId],
  );
  receipt.completedAt = done.rows[0]!.completed_at.toISOString();
  await deps.db.query(`UPDATE erasures SET receipt = COALESCE(receipt, $2::jsonb) WHERE erasure_id = $1`, [
    erasureId,
    JSON.stringify(receipt),
  ]);
  const stored = await erasureRow(deps.db, erasureId);
  return { receipt: stored?.receipt ?? receipt, repeated: false, dryRun: false };
}

/** The receipt of a finished erasure, by its id (the admin route's GET). */
export async function receiptOf(db: Db, erasureId: string): Promise<Receipt | undefined> {
  return (await erasureRow(db, erasureId))?.receipt ?? undefined;
}

async function erasureRow(db: Db, erasureId: string): Promise<ErasureRow | undefined> {
  const { rows } = await db.query<ErasureRow>(
    'SELECT erasure_id, started_at, completed_at, plan, receipt FROM erasures WHERE erasure_id = $1',
    [erasureId],
  );
  return rows[0];
}

/** Their texts as we and AgentMail hold them now, for the history check (memory only). */
async function textsOf(deps: ErasureDeps, plan: ErasurePlan): Promise<string[]> {
  const texts: string[] = [];
  for (const m of plan.messages) {
    const message = await deps.agentmail.inboxes.messages.get(m.inboxId, m.messageId).catch(() => undefined);
    if (message) texts.push(message.subject ?? '', message.extractedText ?? message.text ?? '');
  }
  const { rows } = await deps.db.query<{ text: string | null }>(
    `SELECT result->>'text' AS text FROM operations o
      WHERE kind = 'draft' AND erased_at IS NULL
        AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(o.operation_key, p))`,
    [plan.messages.map((m) => m.keyPrefix)],
  );
  for (const row of rows) if (row.text) texts.push(row.text);
  return texts;
}

async function tombstoneMessages(db: Db, erasureId: string, plan: ErasurePlan): Promise<number> {
  if (plan.messages.length === 0) return 0;
  await db.query(
    `INSERT INTO erased_messages (key_prefix, workflow_id, inbox_id, message_id, thread_id, erasure_id)
     SELECT * , $6 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
     ON CONFLICT DO NOTHING`,
    [
      plan.messages.map((m) => m.keyPrefix),
      plan.messages.map((m) => m.workflowId),
      plan.messages.map((m) => m.inboxId),
      plan.messages.map((m) => m.messageId),
      plan.messages.map((m) => m.threadId),
      erasureId,
    ],
  );
  const { rows } = await db.query<{ n: string }>(
    'SELECT count(*) AS n FROM erased_messages WHERE workflow_id = ANY($1::text[])',
    [plan.messages.map((m) => m.workflowId)],
  );
  return Number(rows[0]!.n);
}

async function withdrawUnstarted(db: Db, plan: ErasurePlan): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM intake WHERE workflow_id = ANY($1::text[]) AND started_at IS NULL', [
    plan.messages.map((m) => m.workflowId),
  ]);
  return rowCount ?? 0;
}

/**
 * The help-desk ticket ids of their threads (`own`: every message of the thread theirs or ours;
 * `shared`: a thread with other people in it), read from the operation results before those are
 * erased, and kept in the plan so a run after a crash still has them.
 */
async function helpdeskTickets(
  db: Db,
  erasureId: string,
  plan: ErasurePlan,
): Promise<{ own: string[]; shared: string[] }> {
  if (plan.tickets) return plan.tickets;
  const idsOf = async (threads: ErasurePlan['threads']) => {
    const { rows } = await db.query<{ ticket_id: string | null }>(
      `SELECT DISTINCT result->>'ticketId' AS ticket_id FROM operations
        WHERE operation_key = ANY($1::text[]) AND erased_at IS NULL AND result ? 'ticketId'`,
      [threads.map((t) => threadTicketKey(t.inboxId, t.threadId))],
    );
    return rows
      .map((r) => r.ticket_id)
      .filter((id): id is string => Boolean(id))
      .sort();
  };
  const tickets = {
    own: await idsOf(plan.threads.filter((t) => t.onlyTheirs)),
    shared: await idsOf(plan.threads.filter((t) => !t.onlyTheirs)),
  };
  plan.tickets = tickets;
  await db.query(`UPDATE erasures SET plan = jsonb_set(plan, '{tickets}', $2::jsonb) WHERE erasure_id = $1`, [
    erasureId,
    JSON.stringify(tickets),
  ]);
  return tickets;
}

/**
 * Every operation of their messages becomes a tombstone: result `{"erased": true}`, a failure's
 * message dropped (its type kept), the lease cleared. One conditional statement per row, on the
 * row an effect's start also updates (store.ts beginEffect): a row whose effect is under way (its
 * lease live) is left until the effect has finished, then erased; the receipt lists a reply that
 * went out before.
 */
async function eraseOperations(deps: ErasureDeps, plan: ErasurePlan): Promise<number> {
  const byPrefix = new Map(plan.messages.map((m) => [m.keyPrefix, m]));
  const deadline = Date.now() + (deps.inFlightWaitMs ?? 120_000);
  let erased = 0;
  for (;;) {
    const { rows } = await deps.db.query<{ operation_key: string }>(
      `SELECT operation_key FROM operations o
        WHERE erased_at IS NULL AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(o.operation_key, p))`,
      [[...byPrefix.keys()]],
    );
    if (rows.length === 0) return erased;
    let waiting = 0;
    for (const row of rows) {
      const done = await tombstoneOperation(deps.db, row.operation_key);
      if (!done) {
        waiting += 1;
        continue;
      }
      erased += 1;
    }
    if (waiting === 0) continue;
    if (Date.now() > deadline)
      throw new Error(
        `${waiting} operation(s) of these messages are still under way (a send, a ticket); nothing of them will run again — run the same erasure again to finish it`,
      );
    await sleep(250);
  }
}

/**
 * One operation becomes a tombstone, unless its effect is under way (begun, lease live): false then,
 * and the caller waits. One statement on the row, ordered with the effect's start by the row's lock.
 */
export async function tombstoneOperation(db: Db, key: string): Promise<boolean> {
  const done = await db.query(
    `UPDATE operations
        SET erased_at = now(),
            result = CASE WHEN result IS NULL THEN NULL ELSE '{"erased": true}'::jsonb END,
            error = CASE WHEN error IS NULL THEN NULL
                         ELSE jsonb_build_object('type', error->>'type', 'message', 'erased on request') END,
            owner_token = NULL, lease_until = NULL, updated_at = now()
      WHERE operation_key = $1 AND erased_at IS NULL
        AND NOT (status = 'processing' AND effect_started_at IS NOT NULL AND lease_until > now())`,
    [key],
  );
  return done.rowCount === 1;
}

/**
 * What had happened before the erasure, from the tombstones' kept status (so a rerun after a crash
 * reports it too): replies sent, sends whose outcome is unknown, notifications delivered.
 */
async function effectsBeforeErasure(db: Db, plan: ErasurePlan, receipt: Receipt): Promise<void> {
  const { rows } = await db.query<{ operation_key: string; kind: string; status: string; began: boolean }>(
    `SELECT operation_key, kind, status, effect_started_at IS NOT NULL AS began FROM operations o
      WHERE erased_at IS NOT NULL AND (kind = 'reply' OR kind LIKE 'notify%')
        AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(o.operation_key, p))
      ORDER BY operation_key`,
    [plan.messages.map((m) => m.keyPrefix)],
  );
  for (const row of rows) {
    const message = plan.messages.find((m) => row.operation_key.startsWith(m.keyPrefix));
    if (!message) continue;
    if (row.kind === 'reply' && row.status === 'complete')
      receipt.sentBeforeErasure.push({
        inboxId: message.inboxId,
        messageId: message.messageId,
        operationKey: row.operation_key,
      });
    else if (row.kind === 'reply' && row.status === 'processing' && row.began)
      receipt.notErased.push({
        where: 'agentmail',
        what: `a reply (${row.operation_key}) whose send had begun when its worker stopped`,
        why: 'its outcome is unknown and it is never retried: if it went out, the customer has the email (our copy at AgentMail is deleted below)',
      });
    else if (row.kind !== 'reply' && row.status === 'complete')
      receipt.notErased.push({
        where: 'review notifications',
        what: `a notification to reviewers (${row.operation_key}) sent before the erasure`,
        why: "with REVIEW_NOTIFY_INCLUDE_TEXT on it quoted the message: delete it in the reviewers' mailbox or Slack channel",
      });
  }
}

async function scrubPostgresTickets(db: Db, plan: ErasurePlan): Promise<{ tickets: number; comments: number }> {
  const threads = plan.threads;
  const ids = await db.query<{ ticket_id: string }>(
    `SELECT ticket_id FROM tickets t
      WHERE (t.inbox_id, t.thread_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
         OR (t.inbox_id, t.message_id) IN (SELECT * FROM unnest($3::text[], $4::text[]))`,
    [
      threads.map((t) => t.inboxId),
      threads.map((t) => t.threadId),
      plan.messages.map((m) => m.inboxId),
      plan.messages.map((m) => m.messageId),
    ],
  );
  const ticketIds = ids.rows.map((r) => r.ticket_id);
  const comments = await db.query(
    `UPDATE ticket_comments SET note = NULL WHERE ticket_id = ANY($1::text[]) AND note IS NOT NULL`,
    [ticketIds],
  );
  const tickets = await db.query(
    `UPDATE tickets SET subject = NULL, note = NULL, status = 'closed'
      WHERE ticket_id = ANY($1::text[]) AND (subject IS NOT NULL OR note IS NOT NULL OR status <> 'closed')`,
    [ticketIds],
  );
  return { tickets: tickets.rowCount ?? 0, comments: comments.rowCount ?? 0 };
}

/**
 * The budget counts replies per address hash for 24 h (activities/decide/reply-budget.ts). Their
 * hash is replaced by one derived from the reservation's own key: the row still counts for its
 * inbox's hourly ceiling, but links to no address.
 */
async function scrubBudget(
  db: Db,
  mailboxHash: string,
  plan: ErasurePlan,
  inboxes: string[] | undefined,
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE reply_reservations r
        SET recipient_hash = CASE WHEN r.recipient_hash = $1 OR m.theirs
                                  THEN encode(sha256(convert_to('erased:' || r.reply_key, 'UTF8')), 'hex') ELSE r.recipient_hash END,
            sender_hash = CASE WHEN r.sender_hash IS NULL THEN NULL
                               WHEN r.sender_hash = $1 OR m.theirs
                               THEN encode(sha256(convert_to('erased-sender:' || r.reply_key, 'UTF8')), 'hex') ELSE r.sender_hash END
       FROM (SELECT x.reply_key, EXISTS (SELECT 1 FROM unnest($2::text[]) p WHERE starts_with(x.reply_key, p)) AS theirs
               FROM reply_reservations x) m
      WHERE m.reply_key = r.reply_key
        AND ($3::text[] IS NULL OR r.inbox_id = ANY($3::text[]))
        AND (r.recipient_hash = $1 OR r.sender_hash = $1 OR m.theirs)`,
    [mailboxHash, plan.messages.map((m) => m.keyPrefix), inboxes ?? null],
  );
  return rowCount ?? 0;
}

/** Runs still open (waiting for a verdict, drafting) end here: nothing of them may go out now. */
async function endOpenRuns(client: Client, plan: ErasurePlan): Promise<string[]> {
  const ended: string[] = [];
  for (const { workflowId } of plan.messages) {
    const handle = client.workflow.getHandle(workflowId);
    const description = await handle.describe().catch(() => undefined);
    if (description?.status.name !== 'RUNNING') continue;
    await handle
      .terminate('erased on request (privacy): nothing of this message is kept or sent')
      .catch(() => undefined);
    ended.push(workflowId);
  }
  return ended;
}

const isNotFound = (error: unknown) =>
  typeof error === 'object' && error !== null && (error as { statusCode?: unknown }).statusCode === 404;

async function deleteAtAgentMail(
  agentmail: AgentMailClient,
  plan: ErasurePlan,
): Promise<{ threads: number; messages: number; failed: string[] }> {
  const result = { threads: 0, messages: 0, failed: [] as string[] };
  const wholeThreads = new Set(
    plan.threads.filter((t) => t.onlyTheirs).map((t) => JSON.stringify([t.inboxId, t.threadId])),
  );
  for (const thread of plan.threads.filter((t) => t.onlyTheirs)) {
    try {
      await agentmail.inboxes.threads.delete(thread.inboxId, thread.threadId);
      result.threads += 1;
    } catch (error) {
      if (isNotFound(error)) continue;
      result.failed.push(thread.threadId);
    }
  }
  const single = [...plan.messages, ...plan.ourReplies].filter(
    (m) => !wholeThreads.has(JSON.stringify([m.inboxId, m.threadId])),
  );
  for (const message of single) {
    try {
      await agentmail.inboxes.messages.delete(message.inboxId, message.messageId);
      result.messages += 1;
    } catch (error) {
      if (isNotFound(error)) continue;
      result.failed.push(message.messageId);
    }
  }
  return result;
}

async function dryRunReceipt(
  deps: ErasureDeps,
  request: EraseRequest,
  erasureId: string,
  mailboxHash: string,
  plan: ErasurePlan,
): Promise<Receipt> {
  const prefixes = plan.messages.map((m) => m.keyPrefix);
  const { rows } = await deps.db.query<{ n: string }>(
    `SELECT count(*) AS n FROM operations o
      WHERE erased_at IS NULL AND EXISTS (SELECT 1 FROM unnest($1::text[]) p WHERE starts_with(o.operation_key, p))`,
    [prefixes],
  );
  return {
    erasureId,
    mailboxHash,
    inboxes: request.inboxes ?? 'all',
    requestedBy: request.requestedBy,
    startedAt: new Date().toISOString(),
    completedAt: null,
    blocked: Boolean(request.block),
    found: {
      messages: plan.messages.length,
      threads: plan.threads.length,
      ourReplies: plan.ourReplies.length,
      inboxes: plan.inboxes.length,
    },
    messages: plan.messages.map(({ inboxId, messageId, workflowId }) => ({ inboxId, messageId, workflowId })),
    erased: [
      {
        where: 'postgres:operations',
        what: 'operations that would become tombstones (dry run: nothing changed)',
        count: Number(rows[0]!.n),
      },
    ],
    sentBeforeErasure: [],
    temporal: { note: HISTORY_NOTE, workflows: [], ended: [] },
    notErased: [],
  };
}

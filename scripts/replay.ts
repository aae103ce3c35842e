// Catch-up after an outage: hands every inbound message that arrived after a time over to the
// intake, as if its webhook had come: one intake row per message (the relay in the API replicas
// starts the workflows, within a second or two). Messages already handed over — by a webhook or
// an earlier run — are counted and left alone; our own outbound mail is skipped. Safe to
// interrupt (Ctrl-C) and run again.
//
//   npm run replay -- --inbox support@example.com --since 2025-12-01T08:00:00Z
//   npm run replay -- --inbox support@example.com --since 36h     (36 hours ago)
//   npm run replay -- --inbox support@example.com                 (resume from the last processed message)
//   npm run replay -- --all                                       (resume every inbox we have processed mail for)
//   npm run replay -- --dev --all                                 (against the `npm run dev` stack)
//
// A message whose workflow a person stopped (terminated or cancelled) is left stopped by every
// catch-up ("stopped by an operator" in the report). To run one again on purpose:
//
//   npm run replay -- --rerun <inbox id> <message id>             (a new run; a sent reply replays, never resends)
//
// The intake relay's dead letter (rows whose start Temporal kept refusing, or that waited a day):
//
//   npm run replay -- --stuck [--all-queues]                      (list them)
//   npm run replay -- --retry-stuck [--all-queues]                (give them back to the relay)
//
// Reads TEMPORAL_TASK_QUEUE (whose relay starts the rows), DATABASE_URL, AGENTMAIL_API_KEY,
// AGENTMAIL_BASE_URL and OPERATION_RETENTION_DAYS, like the worker. --dev fills in the dev stack's
// (the local database, the sandbox and its key from .data/dev-secrets.json) for what is unset.
import { parseArgs } from 'node:util';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { Presets, SingleBar } from 'cli-progress';
import { parseSince, type CatchUpProgress, type CatchUpSummary } from '../intake/catch-up';
import { InboxCursors } from '../intake/inbox-cursors';
import { classifyCatchUpError, createCatchUp } from '../intake/intake';
import { IntakeStore } from '../intake/intake-store';
import { INBOUND_MESSAGE_WORKFLOW } from '../contract';
import { inboundWorkflowId } from '../lib/hashing';
import { connectTemporalClient } from '../lib/temporal-connection';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadReplayConfig, type ReplayConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { runMain, SetupError } from './services/main';
import { devStackEnvironment } from './services/dev-environment';

const USAGE = [
  'usage: npm run replay -- [--dev] (--inbox <inbox id> [--inbox …] | --all) [--since <ISO time | 36h | 6d>]',
  '       npm run replay -- [--dev] --rerun <inbox id> <message id>',
  '       npm run replay -- [--dev] (--stuck | --retry-stuck) [--all-queues]',
].join('\n');

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      inbox: { type: 'string', multiple: true },
      all: { type: 'boolean' },
      since: { type: 'string' },
      dev: { type: 'boolean' },
      rerun: { type: 'boolean' },
      stuck: { type: 'boolean' },
      'retry-stuck': { type: 'boolean' },
      'all-queues': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const config = () => loadReplayConfig(values.dev ? devStackEnvironment(process.env) : process.env);
  if (values.rerun) {
    const [inboxId, messageId, ...rest] = positionals;
    if (!inboxId || !messageId || rest.length > 0)
      throw new SetupError(`--rerun takes one inbox id and one message id\n${USAGE}`);
    return rerun(config(), { inboxId, messageId });
  }
  if (positionals.length > 0) throw new SetupError(`unexpected argument ${positionals[0]}\n${USAGE}`);
  if (values.stuck || values['retry-stuck']) return deadLetter(config(), Boolean(values['retry-stuck']), values);
  const named = values.inbox ?? [];
  if (named.length > 0 === Boolean(values.all))
    throw new SetupError(`name the inboxes with --inbox, or pass --all (one of them)\n${USAGE}`);
  const since = values.since === undefined ? undefined : parseSince(values.since);
  const settings = config();

  const db = createDb(settings.DATABASE_URL);
  // Lazy: the catch-up needs no Temporal; it asks it which messages a person stopped, when it answers.
  const connection = await connectTemporalClient(settings.temporal, { lazy: true });
  const cursors = new InboxCursors(db);
  const stop = new AbortController();
  process.on('SIGINT', () => {
    if (stop.signal.aborted) process.exit(130);
    console.error('\n[replay] stopping after the page in flight (Ctrl-C again to quit now; running again is safe)');
    stop.abort();
  });

  try {
    const inboxIds = values.all ? (await cursors.list()).map((cursor) => cursor.inboxId) : named;
    if (inboxIds.length === 0)
      console.log('[replay] no inbox has a cursor yet: nothing to resume (name one with --inbox and --since)');
    const catchUp = createCatchUp({
      db,
      agentmail: createAgentMailClient({ apiKey: settings.AGENTMAIL_API_KEY, baseUrl: settings.AGENTMAIL_BASE_URL }),
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
      operationRetentionDays: settings.OPERATION_RETENTION_DAYS,
      temporal: new Client({ connection, namespace: settings.TEMPORAL_NAMESPACE }),
    });
    const summaries: CatchUpSummary[] = [];
    let refused = false;
    for (const inboxId of inboxIds) {
      if (stop.signal.aborted) break;
      const view = process.stdout.isTTY ? new ProgressBar(inboxId) : new ProgressLines();
      try {
        summaries.push(
          await catchUp.run({
            inboxId,
            since,
            signal: stop.signal,
            onProgress: (progress) => view.update(progress),
          }),
        );
      } catch (error) {
        // One inbox's problem does not stop the others; a named inbox's is the person's to fix.
        const failure = classifyCatchUpError(error);
        if (failure === undefined || failure.kind === 'provider') throw error;
        console.error(`[replay] ${inboxId}: not run: ${failure.message}`);
        refused ||= !(failure.kind === 'no_inbox' && values.all);
      } finally {
        view.stop();
      }
    }
    printSummary(summaries, await catchUp.backlog());
    if (summaries.some((s) => s.interrupted) || stop.signal.aborted) return 130;
    return refused ? 1 : 0;
  } finally {
    await Promise.allSettled([db.end(), connection.close()]);
  }
}

/**
 * An operator's rerun of ONE message, on purpose: a new run whatever the last one was (completed,
 * failed, or stopped by a person), under the same operation keys, so a reply that went out
 * replays (never resends) and the rest is decided again as configured now. A running workflow
 * is left alone (said, not restarted).
 */
async function rerun(settings: ReplayConfig, ref: { inboxId: string; messageId: string }): Promise<number> {
  const connection = await connectTemporalClient(settings.temporal);
  try {
    const client = new Client({ connection, namespace: settings.TEMPORAL_NAMESPACE });
    const workflowId = inboundWorkflowId(ref);
    const last = await client.workflow
      .getHandle(workflowId)
      .describe()
      .catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) return undefined;
        throw error;
      });
    if (last?.status.name === 'RUNNING') {
      console.log(`[replay] ${workflowId} is running (run ${last.runId}): left alone, nothing restarted`);
      return 0;
    }
    const handle = await client.workflow.start(INBOUND_MESSAGE_WORKFLOW, {
      taskQueue: settings.TEMPORAL_TASK_QUEUE,
      workflowId,
      args: [ref],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    console.log(
      `[replay] rerun started: ${workflowId}, run ${handle.firstExecutionRunId}` +
        `${last ? ` (the last run ${last.status.name.toLowerCase()})` : ''}; a reply that went out replays, never resends`,
    );
    return 0;
  } finally {
    await connection.close();
  }
}

/** --stuck lists the dead letter; --retry-stuck gives it back to the relay (the API replicas start it). */
async function deadLetter(
  settings: ReplayConfig,
  retry: boolean,
  flags: { 'all-queues'?: boolean | undefined },
): Promise<number> {
  const db = createDb(settings.DATABASE_URL);
  try {
    const store = new IntakeStore(db, settings.TEMPORAL_TASK_QUEUE);
    const allQueues = Boolean(flags['all-queues']);
    const rows = await store.stuck({ allQueues });
    const other = (await store.backlog()).byState.other_queue;
    if (!retry) {
      if (rows.length === 0) console.log(`[replay] the dead letter of ${settings.TEMPORAL_TASK_QUEUE} is empty`);
      for (const row of rows)
        console.log(
          [
            row.workflowId,
            `inbox ${row.inboxId}`,
            `message ${row.messageId}`,
            row.taskQueue === settings.TEMPORAL_TASK_QUEUE
              ? 'dead'
              : `task queue ${row.taskQueue} (not this deployment's)`,
            `accepted ${row.acceptedAt.toISOString()}`,
            `${row.attempts} failed start(s)`,
            `last error ${row.lastErrorClass ?? 'none'}`,
          ].join('  '),
        );
      if (!allQueues && other > 0)
        console.log(
          `[replay] ${other} unstarted row(s) belong to another TEMPORAL_TASK_QUEUE than ${settings.TEMPORAL_TASK_QUEUE}: --all-queues lists them (a renamed queue leaves them behind)`,
        );
      if (rows.length > 0) console.log('[replay] retry them with: npm run replay -- --retry-stuck');
      return 0;
    }
    const retried = await store.retryStuck({ allQueues });
    console.log(
      `[replay] ${retried} row(s) given back to the relay of ${settings.TEMPORAL_TASK_QUEUE}: the API replicas start them within a second or two`,
    );
    return 0;
  } finally {
    await db.end();
  }
}

interface ProgressView {
  update(progress: CatchUpProgress): void;
  stop(): void;
}

/** On a terminal: one bar per inbox, its total growing as pages are listed. */
class ProgressBar implements ProgressView {
  private readonly bar = new SingleBar(
    {
      format:
        '{inbox} |{bar}| {value}/{total} | handed over {handedOver} · already {already} · answered {answered} · skipped {skipped}',
      hideCursor: true,
    },
    Presets.shades_classic,
  );
  private begun = false;

  constructor(private readonly inboxId: string) {}

  update(p: CatchUpProgress): void {
    const payload = {
      inbox: this.inboxId,
      handedOver: p.handedOver,
      already: p.alreadyHandedOver,
      answered: p.alreadyAnswered,
      skipped: p.skipped,
    };
    const done = p.handedOver + p.alreadyHandedOver + p.alreadyAnswered + p.skipped;
    if (!this.begun) {
      this.bar.start(p.listed, done, payload);
      this.begun = true;
    }
    this.bar.setTotal(p.listed);
    this.bar.update(done, payload);
  }

  stop(): void {
    if (this.begun) this.bar.stop();
  }
}

/** Not a terminal (a log, CI, a pipe): one plain line per page listed. */
class ProgressLines implements ProgressView {
  private pages = 0;
  private last: CatchUpProgress | undefined;

  update(p: CatchUpProgress): void {
    if (p.pages !== this.pages && this.last) this.print(this.last);
    this.pages = p.pages;
    this.last = p;
  }

  stop(): void {
    if (this.last) this.print(this.last);
  }

  private print(p: CatchUpProgress): void {
    console.log(
      `[replay] ${p.inboxId}: page ${p.pages}, ${p.listed} listed, handed over ${p.handedOver}, already handed over ${p.alreadyHandedOver}, already answered ${p.alreadyAnswered}, skipped ${p.skipped}`,
    );
  }
}

function printSummary(summaries: CatchUpSummary[], backlog: { unstarted: number; oldestSeconds: number }): void {
  const lines = ['', 'replay summary'];
  const counts = (c: Omit<CatchUpSummary, 'inboxId' | 'since' | 'resumed' | 'cursor' | 'interrupted' | 'pages'>) =>
    `handed over ${c.handedOver} / already handed over ${c.alreadyHandedOver} / already answered ${c.alreadyAnswered} / stopped by an operator ${c.stoppedByOperator} / skipped ${c.skipped}`;
  for (const s of summaries) {
    lines.push(
      `  ${s.inboxId}: after ${s.since}${s.resumed ? ' (resumed from the last processed message, less 28 h of overlap)' : ''}`,
    );
    lines.push(
      `    ${counts(s)}   (${s.listed} listed, ${s.pages} page${s.pages === 1 ? '' : 's'}; cursor ${s.cursor ?? 'none'})`,
    );
    if (s.note) lines.push(`    note: ${s.note}`);
    if (s.interrupted) lines.push('    interrupted: run the same command again to finish');
  }
  const total = (pick: (s: CatchUpSummary) => number) => summaries.reduce((n, s) => n + pick(s), 0);
  lines.push(
    `total: ${counts({
      listed: total((s) => s.listed),
      handedOver: total((s) => s.handedOver),
      alreadyHandedOver: total((s) => s.alreadyHandedOver),
      alreadyAnswered: total((s) => s.alreadyAnswered),
      stoppedByOperator: total((s) => s.stoppedByOperator),
      skipped: total((s) => s.skipped),
    })}`,
  );
  // What "handed over" means next: the relay of every API replica starts these rows.
  lines.push(
    backlog.unstarted === 0
      ? 'every handed-over message of this task queue has its workflow started'
      : `${backlog.unstarted} handed-over message(s) of this task queue wait for their workflow start (oldest ${Math.round(backlog.oldestSeconds)} s): ` +
          'the API replicas start them within a second or two; if this stays, check that the API runs and reaches Temporal (replyonce_intake_backlog)',
  );
  console.log(lines.join('\n'));
}

if (require.main === module) {
  // A bad setting or request is the person's to fix: one line, no stack.
  runMain(() =>
    main().catch((error: unknown) => {
      if (error instanceof ConfigError) throw new SetupError(error.message);
      // Status and name only: the SDK's message holds AgentMail's whole response body.
      const failure = classifyCatchUpError(error);
      if (failure?.kind === 'provider') throw new SetupError(`${failure.message}; running the replay again is safe`);
      if (failure) throw new SetupError(failure.message);
      throw error;
    }),
  );
}

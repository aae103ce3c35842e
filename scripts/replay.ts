// Catch-up after an outage: starts the workflow of every inbound message that arrived after a
// time, as if its webhook had come. Messages already answered are not answered again (their
// workflow exists), our own outbound mail is skipped. Safe to interrupt (Ctrl-C) and run again.
//
//   npm run replay -- --inbox support@example.com --since 2025-12-01T08:00:00Z
//   npm run replay -- --inbox support@example.com --since 36h     (36 hours ago)
//   npm run replay -- --inbox support@example.com                 (resume from the last processed message)
//   npm run replay -- --all                                       (resume every inbox we have processed mail for)
//
// Reads Temporal's connection variables (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TLS_*, TEMPORAL_API_KEY,
// TEMPORAL_PROFILE), TEMPORAL_TASK_QUEUE, DATABASE_URL, AGENTMAIL_API_KEY, AGENTMAIL_BASE_URL and
// OPERATION_RETENTION_DAYS, like the worker.
import { parseArgs } from 'node:util';
import { Client } from '@temporalio/client';
import { AgentMailError } from 'agentmail';
import { Presets, SingleBar } from 'cli-progress';
import {
  catchUpInbox,
  CatchUpRequestError,
  parseSince,
  type CatchUpProgress,
  type CatchUpSummary,
} from '../api/catch-up/catch-up';
import { InboxCursors } from '../api/catch-up/inbox-cursors';
import { createAgentMailClient } from '../lib/agentmail';
import { ConfigError, loadReplayConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { isAgentMailError, providerErrorText } from '../lib/provider-errors';
import { connectTemporalClient } from '../lib/temporal-connection';
import { messageOf, runMain, SetupError } from './services/main';

const USAGE = 'usage: npm run replay -- (--inbox <inbox id> [--inbox …] | --all) [--since <ISO time | 36h | 6d>]';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      inbox: { type: 'string', multiple: true },
      all: { type: 'boolean' },
      since: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const named = values.inbox ?? [];
  if (named.length > 0 === Boolean(values.all))
    throw new SetupError(`name the inboxes with --inbox, or pass --all (one of them)\n${USAGE}`);
  const since = values.since === undefined ? undefined : parseSince(values.since);
  const config = loadReplayConfig();

  const db = createDb(config.DATABASE_URL);
  const cursors = new InboxCursors(db);
  const connection = await connectTemporalClient(config.temporal, { connectTimeoutMs: 5_000 }).catch(
    (error: unknown) => {
      throw new SetupError(messageOf(error));
    },
  );
  const stop = new AbortController();
  process.on('SIGINT', () => {
    if (stop.signal.aborted) process.exit(130);
    console.error(
      '\n[replay] stopping once the messages in flight are done (Ctrl-C again to quit now; running again is safe)',
    );
    stop.abort();
  });

  try {
    const inboxIds = values.all ? (await cursors.list()).map((cursor) => cursor.inboxId) : named;
    if (inboxIds.length === 0)
      console.log('[replay] no inbox has a cursor yet: nothing to resume (name one with --inbox and --since)');
    const deps = {
      agentmail: createAgentMailClient({ apiKey: config.AGENTMAIL_API_KEY, baseUrl: config.AGENTMAIL_BASE_URL }),
      temporal: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      cursors,
      operationRetentionDays: config.OPERATION_RETENTION_DAYS,
    };
    const summaries: CatchUpSummary[] = [];
    let refused = false;
    for (const inboxId of inboxIds) {
      if (stop.signal.aborted) break;
      const view = process.stdout.isTTY ? new ProgressBar(inboxId) : new ProgressLines();
      try {
        summaries.push(
          await catchUpInbox(deps, {
            inboxId,
            since,
            signal: stop.signal,
            onProgress: (progress) => view.update(progress),
          }),
        );
      } catch (error) {
        // One inbox's problem does not stop the others; a named inbox's is the person's to fix.
        const gone = error instanceof AgentMailError && error.statusCode === 404;
        if (!gone && !(error instanceof CatchUpRequestError)) throw error;
        console.error(`[replay] ${inboxId}: not run: ${gone ? 'AgentMail has no such inbox' : error.message}`);
        refused ||= !(gone && values.all);
      } finally {
        view.stop();
      }
    }
    printSummary(summaries);
    if (summaries.some((s) => s.interrupted) || stop.signal.aborted) return 130;
    return refused || summaries.some((s) => s.failed > 0 || s.stoppedBecause) ? 1 : 0;
  } finally {
    await connection.close();
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
        '{inbox} |{bar}| {value}/{total} | started {started} · answered {answered} · skipped {skipped} · failed {failed}',
      hideCursor: true,
    },
    Presets.shades_classic,
  );
  private begun = false;

  constructor(private readonly inboxId: string) {}

  update(p: CatchUpProgress): void {
    const payload = {
      inbox: this.inboxId,
      started: p.started,
      answered: p.alreadyAnswered,
      skipped: p.skipped,
      failed: p.failed,
    };
    const done = p.started + p.alreadyAnswered + p.skipped + p.failed;
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
      `[replay] ${p.inboxId}: page ${p.pages}, ${p.listed} listed, started ${p.started}, already answered ${p.alreadyAnswered}, skipped ${p.skipped}, failed ${p.failed}`,
    );
  }
}

function printSummary(summaries: CatchUpSummary[]): void {
  const lines = ['', 'replay summary'];
  for (const s of summaries) {
    lines.push(
      `  ${s.inboxId}: after ${s.since}${s.resumed ? ' (resumed from the last processed message, less 28 h of overlap)' : ''}`,
    );
    lines.push(
      `    started ${s.started} / already answered ${s.alreadyAnswered} / skipped ${s.skipped} / failed ${s.failed}   (${s.listed} listed, ${s.pages} page${s.pages === 1 ? '' : 's'}; cursor ${s.cursor ?? 'none'})`,
    );
    if (s.note) lines.push(`    note: ${s.note}`);
    if (s.interrupted) lines.push('    interrupted: run the same command again to finish');
    if (s.stoppedBecause) lines.push(`    stopped: ${s.stoppedBecause}`);
  }
  const total = (pick: (s: CatchUpSummary) => number) => summaries.reduce((n, s) => n + pick(s), 0);
  lines.push(
    `total: started ${total((s) => s.started)} / already answered ${total((s) => s.alreadyAnswered)} / skipped ${total((s) => s.skipped)} / failed ${total((s) => s.failed)}`,
  );
  if (total((s) => s.failed) > 0)
    lines.push('failed messages were not handed to a workflow: run the same command again once Temporal is reachable');
  console.log(lines.join('\n'));
}

if (require.main === module) {
  // A bad setting or request is the person's to fix: one line, no stack.
  runMain(() =>
    main().catch((error: unknown) => {
      if (error instanceof ConfigError || error instanceof CatchUpRequestError) throw new SetupError(error.message);
      // Status and name only: the SDK's message holds AgentMail's whole response body.
      if (isAgentMailError(error))
        throw new SetupError(`${providerErrorText(error)}; running the replay again is safe`);
      throw error;
    }),
  );
}

// Rehearse on your own mail (docs/rehearsal.md): what the agent would have done with an inbox's past
// mail, beside what the team did, with every outward effect diverted. This process is the
// rehearsal's worker: the configuration rehearsed is its environment (DRAFT_*, KNOWLEDGE_*,
// APPROVAL_REQUIRED_INBOXES…), so a candidate is rehearsed by running it with the candidate's.
//
//   npm run rehearse -- --inbox <inbox> (--since 14d | --from <ISO> --to <ISO>) [--limit N | --sample N]
//                       [--id <rehearsal id>] [--concurrency N] [--json] [--dev]
//   npm run rehearse -- --report <id> [--json]          the report of a rehearsal
//   npm run rehearse -- --compare <A> <B> [--json]      exactly the messages whose outcome changed
//   npm run rehearse -- --list [--inbox <inbox>]         the rehearsals kept
//   npm run rehearse -- --delete <id>                    deletes a rehearsal and all it holds
//
// Started again with the same --id (after a crash, a Ctrl-C), it resumes: one rehearsal, each message
// drafted once. Progress goes to stderr, the report to stdout.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowFailedError } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import cliProgress from 'cli-progress';
import { createDrafter } from '../activities/draft/drafting/create-drafter';
import { createRehearsalActivities } from '../activities/rehearsal';
import { rehearsalConfiguration } from '../activities/rehearsal/configuration';
import { compareRehearsals, comparisonMarkdown } from '../activities/rehearsal/compare';
import { loadRows, rehearsalReport, reportMarkdown, type ReportSettings } from '../activities/rehearsal/report';
import {
  createRehearsal,
  deleteRehearsal,
  findRehearsal,
  listRehearsals,
  RehearsalMismatch,
} from '../activities/rehearsal/store';
import {
  REHEARSAL_ID,
  REHEARSAL_WORKFLOW,
  type RehearsalInput,
  rehearsalProgressQuery,
  rehearsalTaskQueue,
  rehearsalWorkflowId,
} from '../contract/rehearsal';
import { createAgentMailClient } from '../lib/agentmail';
import { loadWorkerConfig, parseDuration, type WorkerConfig } from '../lib/config';
import { createDb, type Db } from '../lib/db';
import { connectTemporalClient, connectTemporalWorker } from '../lib/temporal-connection';
import { runMain, SetupError, sleep } from './services/main';
import { devStackEnvironment } from './services/dev-environment';

const USAGE = [
  'usage: npm run rehearse -- --inbox <inbox> (--since 14d | --from <ISO> --to <ISO>) [--limit N | --sample N] [--id <id>] [--json] [--dev]',
  '       npm run rehearse -- --report <id> [--json]',
  '       npm run rehearse -- --compare <A> <B> [--json]',
  '       npm run rehearse -- --list [--inbox <inbox>]',
  '       npm run rehearse -- --delete <id>',
].join('\n');

/** Without --limit or --sample: the first 500 messages of the period. */
const DEFAULT_LIMIT = 500;
/** The most messages one rehearsal drafts: a bigger period is sampled (--sample), never run without end. */
export const MAX_REHEARSED = 5_000;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      inbox: { type: 'string' },
      since: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      limit: { type: 'string' },
      sample: { type: 'string' },
      id: { type: 'string' },
      concurrency: { type: 'string' },
      'read-wait': { type: 'string' },
      report: { type: 'string' },
      compare: { type: 'string' },
      list: { type: 'boolean' },
      delete: { type: 'string' },
      json: { type: 'boolean' },
      dev: { type: 'boolean' },
      help: { type: 'boolean' },
    },
    allowPositionals: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const config = loadWorkerConfig(values.dev ? devStackEnvironment(process.env) : process.env);
  const db = createDb(config.DATABASE_URL);
  const settings: ReportSettings = {
    slowAnswerMs: config.REHEARSAL_SLOW_ANSWER,
    inputPricePerMTok: config.REHEARSAL_INPUT_PRICE_PER_MTOK,
    outputPricePerMTok: config.REHEARSAL_OUTPUT_PRICE_PER_MTOK,
  };
  try {
    if (values.report !== undefined) return await printReport(db, values.report, settings, values.json === true);
    if (values.compare !== undefined) {
      const [b] = positionals;
      if (b === undefined) throw new SetupError(`--compare takes two rehearsal ids: --compare <A> <B>\n${USAGE}`);
      return await printComparison(db, values.compare, b, values.json === true);
    }
    if (values.delete !== undefined) {
      const deleted = await deleteRehearsal(db, values.delete);
      console.log(deleted ? `deleted rehearsal ${values.delete}` : `no rehearsal ${values.delete}`);
      return deleted ? 0 : 1;
    }
    if (values.list) {
      const rows = await listRehearsals(db, values.inbox ? [values.inbox.toLowerCase()] : null);
      for (const r of rows)
        console.log(
          `${r.rehearsalId}\t${r.inboxId}\t${r.from.toISOString()}..${r.to.toISOString()}\t${r.finishedAt ? 'finished' : 'unfinished'}\t${String(r.configuration.drafter)}`,
        );
      return 0;
    }
    return await rehearse(config, db, values, settings);
  } finally {
    await db.end();
  }
}

async function printReport(db: Db, id: string, settings: ReportSettings, json: boolean): Promise<number> {
  const report = await rehearsalReport(db, id, settings);
  if (report === null) throw new SetupError(`no rehearsal ${id} (deleted, expired, or never started)`);
  process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : reportMarkdown(report));
  return 0;
}

async function printComparison(db: Db, a: string, b: string, json: boolean): Promise<number> {
  for (const id of [a, b])
    if ((await findRehearsal(db, id)) === null)
      throw new SetupError(`no rehearsal ${id} (deleted, expired, or never started)`);
  const comparison = compareRehearsals(a, await loadRows(db, a), b, await loadRows(db, b));
  process.stdout.write(json ? `${JSON.stringify(comparison, null, 2)}\n` : comparisonMarkdown(comparison));
  return 0;
}

function count(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_REHEARSED)
    throw new SetupError(
      `--${name} must be a whole number from 1 to ${MAX_REHEARSED} (a bigger period is rehearsed by --sample ${MAX_REHEARSED})`,
    );
  return n;
}

/** The period: --since <duration> (up to now), or --from and --to (ISO times). */
function period(values: { since?: string; from?: string; to?: string }): { from: Date; to: Date } {
  if (values.since !== undefined) {
    if (values.from !== undefined) throw new SetupError('give --since or --from/--to, not both');
    const ms = parseDuration(values.since);
    if (ms === null || ms <= 0)
      throw new SetupError(`--since must be a duration such as 14d or 36h, got ${values.since}`);
    const to = values.to !== undefined ? isoTime(values.to, 'to') : new Date();
    return { from: new Date(to.getTime() - ms), to };
  }
  if (values.from === undefined || values.to === undefined)
    throw new SetupError(`a period is needed: --since 14d, or --from and --to\n${USAGE}`);
  const from = isoTime(values.from, 'from');
  const to = isoTime(values.to, 'to');
  if (to.getTime() <= from.getTime()) throw new SetupError('--to must come after --from');
  return { from, to };
}

function isoTime(value: string, name: string): Date {
  const at = new Date(value);
  if (Number.isNaN(at.getTime()))
    throw new SetupError(`--${name} must be an ISO 8601 time such as 2026-11-20T00:00:00Z`);
  return at;
}

async function rehearse(
  config: WorkerConfig,
  db: Db,
  values: {
    inbox?: string;
    since?: string;
    from?: string;
    to?: string;
    limit?: string;
    sample?: string;
    id?: string;
    concurrency?: string;
    'read-wait'?: string;
    json?: boolean;
  },
  settings: ReportSettings,
): Promise<number> {
  if (values.inbox === undefined) throw new SetupError(`--inbox is needed\n${USAGE}`);
  if (values.limit !== undefined && values.sample !== undefined)
    throw new SetupError('give --limit or --sample, not both');
  const { from, to } = period(values);
  const sample = count(values.sample, 'sample');
  const limit = sample ?? count(values.limit, 'limit') ?? DEFAULT_LIMIT;
  const rehearsalId = values.id ?? `${new Date().toISOString().slice(0, 10)}-${randomBytes(3).toString('hex')}`;
  if (!REHEARSAL_ID.test(rehearsalId))
    throw new SetupError(
      '--id must be lower-case letters, digits, dots, dashes or underscores (at most 63), starting with a letter or digit',
    );
  const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
  const readWaitMs = values['read-wait'] === undefined ? undefined : (parseDuration(values['read-wait']) ?? undefined);

  const agentmail = createAgentMailClient({ apiKey: config.AGENTMAIL_API_KEY, baseUrl: config.AGENTMAIL_BASE_URL });
  const drafter = createDrafter(config);
  const configuration = await rehearsalConfiguration({ db, drafter, config }, values.inbox);
  try {
    const { created } = await createRehearsal(db, {
      rehearsalId,
      inboxId: values.inbox,
      from,
      to,
      limit,
      sampled: sample !== undefined,
      configuration,
      retentionMs: config.REHEARSAL_RETENTION,
    });
    console.error(
      `${created ? 'rehearsal' : 'resuming rehearsal'} ${rehearsalId} (drafter ${drafter.name}); ` +
        `if this stops, run the same command with --id ${rehearsalId} to resume it`,
    );
  } catch (error) {
    if (error instanceof RehearsalMismatch) throw new SetupError(error.message);
    throw error;
  }

  // The worker's own log goes to stderr with the progress bar: stdout is the report's alone.
  Runtime.install({
    logger: new DefaultLogger(['debug', 'trace'].includes(config.LOG_LEVEL) ? 'DEBUG' : 'WARN', (entry) =>
      process.stderr.write(`${entry.level} ${entry.message} ${JSON.stringify(entry.meta ?? {})}\n`),
    ),
  });
  const connection = await connectTemporalClient(config.temporal);
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const workerConnection = await connectTemporalWorker(config.temporal);
  const taskQueue = rehearsalTaskQueue(rehearsalId);
  const bundlePath = process.env.REPLYONCE_WORKFLOW_BUNDLE;
  const worker = await Worker.create({
    connection: workerConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue,
    activities: createRehearsalActivities({ db, agentmail, drafter, config }),
    ...(bundlePath
      ? { workflowBundle: { codePath: bundlePath } }
      : {
          workflowBundle: await bundleWorkflowCode({
            workflowsPath: require.resolve('../workflows/rehearsal'),
            logger: quietBundler,
          }),
        }),
  });
  const running = worker.run();
  const stop = () => worker.shutdown();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const bar = new cliProgress.SingleBar(
    {
      format: 'rehearsing |{bar}| {value}/{total} messages · {eta_formatted} left',
      stream: process.stderr,
      hideCursor: true,
    },
    cliProgress.Presets.shades_classic,
  );
  try {
    const input: RehearsalInput = {
      rehearsalId,
      ...(concurrency !== undefined && Number.isInteger(concurrency) ? { concurrency } : {}),
      ...(readWaitMs !== undefined ? { readWaitMs } : {}),
    };
    const handle = await client.workflow
      .start(REHEARSAL_WORKFLOW, {
        workflowId: rehearsalWorkflowId(rehearsalId),
        taskQueue,
        args: [input],
        // Started twice with the same id: one rehearsal (a running one is attached to; a finished one is its report).
        workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      })
      .catch((error: unknown) => {
        if (error instanceof WorkflowExecutionAlreadyStartedError)
          return client.workflow.getHandle(rehearsalWorkflowId(rehearsalId));
        throw error;
      });
    let started = false;
    const result = handle.result().catch((error: unknown) => {
      // The workflow's own failure (another configuration, a rehearsal deleted meanwhile) in its words.
      if (error instanceof WorkflowFailedError) {
        let cause: unknown = error.cause;
        while (cause instanceof Error && cause.cause instanceof Error) cause = cause.cause;
        throw new SetupError(`rehearsal ${rehearsalId} failed: ${cause instanceof Error ? cause.message : 'unknown'}`);
      }
      throw error;
    });
    for (;;) {
      const finished = await Promise.race([result.then(() => true), sleep(500).then(() => false)]);
      const progress = await handle.query(rehearsalProgressQuery).catch(() => null);
      if (progress !== null && progress.phase !== 'listing') {
        if (!started) bar.start(progress.total, progress.done);
        started = true;
        bar.update(progress.done);
      }
      if (finished) break;
    }
    if (started) bar.stop();
  } finally {
    worker.shutdown();
    await running;
    await workerConnection.close();
    await connection.close();
  }
  return printReport(db, rehearsalId, settings, values.json === true);
}

const quietBundler = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => console.error(message),
  error: (message: string) => console.error(message),
};

runMain(main);

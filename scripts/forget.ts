// Forget a customer on request (GDPR article 17): every text replyonce holds of their messages is
// erased across inboxes, each erased operation is left as a content-free tombstone (so a late
// webhook, a catch-up or a rerun never answers them again), AgentMail's copy is deleted, open runs
// are ended, Temporal's histories are checked, and a receipt is stored and printed (docs/privacy.md).
//
//   npm run forget -- --address ada@example.com                       (every inbox)
//   npm run forget -- --address ada@example.com --inbox support@x.com  (only these inboxes)
//   npm run forget -- --address ada@example.com --dry-run              (what it would erase; nothing changes)
//   npm run forget -- --address ada@example.com --block               (and hold their new mail for a person)
//   … --by "Ana Lima"   (who asked, on the receipt; default: $USER)    … --json (the receipt as JSON)
//   … --again           (a new request after an earlier erasure finished: they wrote again since)
//
// Running the same erasure again prints its first receipt (--again makes a new one). Reads DATABASE_URL, AGENTMAIL_API_KEY,
// AGENTMAIL_BASE_URL, TICKET_PROVIDER (with ZENDESK_* to delete Zendesk tickets) and Temporal's
// connection, like the worker.
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import { Client } from '@temporalio/client';
import { createAgentMailClient } from '../lib/agentmail';
import { loadForgetConfig } from '../lib/config';
import { createDb } from '../lib/db';
import { connectTemporalClient } from '../lib/temporal-connection';
import { ZendeskTickets } from '../activities/ticket/zendesk-tickets';
import { erase, type Receipt } from '../privacy/erase';
import { runMain, SetupError } from './services/main';

const USAGE =
  'usage: npm run forget -- --address <mailbox> [--inbox <inbox id> …] [--dry-run] [--block] [--again] [--by <who asked>] [--json]';

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      address: { type: 'string' },
      inbox: { type: 'string', multiple: true },
      'dry-run': { type: 'boolean' },
      block: { type: 'boolean' },
      again: { type: 'boolean' },
      by: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals.length > 0) throw new SetupError(`unexpected argument ${positionals[0]}\n${USAGE}`);
  if (!values.address) throw new SetupError(`--address is required\n${USAGE}`);
  const settings = loadForgetConfig();
  const db = createDb(settings.DATABASE_URL);
  const connection = await connectTemporalClient(settings.temporal);
  try {
    const outcome = await erase(
      {
        db,
        agentmail: createAgentMailClient({ apiKey: settings.AGENTMAIL_API_KEY, baseUrl: settings.AGENTMAIL_BASE_URL }),
        temporal: new Client({ connection, namespace: settings.TEMPORAL_NAMESPACE }),
        ticketProvider: settings.TICKET_PROVIDER,
        zendesk: zendeskOf(settings),
      },
      {
        address: values.address,
        inboxes: values.inbox,
        dryRun: values['dry-run'],
        block: values.block,
        again: values.again,
        requestedBy: values.by ?? `cli:${userInfo().username}`,
      },
    );
    if (values.json) console.log(JSON.stringify(outcome, null, 2));
    else printReceipt(outcome.receipt, outcome);
    return 0;
  } finally {
    await Promise.allSettled([db.end(), connection.close()]);
  }
}

/** Zendesk's deletion when its settings are there; without them the receipt lists the tickets to delete by hand. */
function zendeskOf(settings: ReturnType<typeof loadForgetConfig>): ZendeskTickets | undefined {
  const { TICKET_PROVIDER, ZENDESK_URL: url, ZENDESK_EMAIL: email, ZENDESK_API_TOKEN: apiToken } = settings;
  if (TICKET_PROVIDER !== 'zendesk' || !url || !email || !apiToken) return undefined;
  return new ZendeskTickets({ url, email, apiToken, timeoutMs: settings.ZENDESK_TIMEOUT_MS });
}

function printReceipt(receipt: Receipt, outcome: { repeated: boolean; dryRun: boolean }): void {
  const head = outcome.dryRun
    ? 'DRY RUN (nothing changed)'
    : outcome.repeated
      ? 'already erased; the first receipt'
      : 'erased';
  console.log(`[forget] ${head}: erasure ${receipt.erasureId}`);
  console.log(
    `  mailbox sha256 ${receipt.mailboxHash}; inboxes: ${receipt.inboxes === 'all' ? 'all' : receipt.inboxes.join(', ')}`,
  );
  console.log(
    `  requested by ${receipt.requestedBy}; started ${receipt.startedAt}; completed ${receipt.completedAt ?? '-'}`,
  );
  const f = receipt.found;
  console.log(
    `  found: ${f.messages} message(s), ${f.threads} thread(s), ${f.ourReplies} reply(ies) of ours, in ${f.inboxes} inbox(es)`,
  );
  for (const e of receipt.erased) console.log(`  erased  ${e.where}: ${e.count} ${e.what}`);
  for (const s of receipt.sentBeforeErasure) console.log(`  sent before the erasure: ${s.operationKey}`);
  for (const w of receipt.temporal.workflows)
    console.log(
      `  temporal ${w.workflowId}: ${w.found ? `${w.status}, ${w.holdsErasedText ? 'HOLDS erased text' : 'no erased text'}` : 'not found'}`,
    );
  for (const id of receipt.temporal.ended) console.log(`  temporal ${id}: open run ended`);
  for (const n of receipt.notErased)
    console.log(`  NOT erased ${n.where}: ${n.what} — ${n.why}${n.ids?.length ? ` (${n.ids.join(', ')})` : ''}`);
}

runMain(main);

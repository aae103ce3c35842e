// `npm run ids -- --inbox <inbox id> --message <message id> [--json]`: the ids replyonce derives for one
// message, without a server: its workflow id (for the Web UI, `npm run temporal -- workflow …`,
// the logs) and its operation keys (rows of the `operations` table), with AgentMail's
// Idempotency-Key for the sends. The same functions the ingress and the workflow use
// (lib/hashing.ts, contract/keys.ts), so what it prints is what they use.
import { parseArgs } from 'node:util';
import { decisionKey, draftKey, providerDraftKey, replyKey, reviewKey, ticketKey, type MessageRef } from '../contract';
import { inboundWorkflowId, providerIdempotencyKey } from '../lib/hashing';
import { SetupError, runMain } from './services/main';

const USAGE = 'usage: npm run ids -- --inbox <inbox id> --message <message id> [--json]';

export interface MessageIds {
  workflowId: string;
  operations: Array<{ kind: string; key: string; idempotencyKey?: string }>;
}

/** Every id of one message: the workflow's, and each operation key (v2: an approver's edit). */
export function messageIds(ref: MessageRef): MessageIds {
  const operations: MessageIds['operations'] = [
    { kind: 'decision', key: decisionKey(ref) },
    { kind: 'ticket', key: ticketKey(ref) },
    { kind: 'review', key: reviewKey(ref) },
  ];
  for (const version of [1, 2]) {
    operations.push(
      { kind: `draft v${version}`, key: draftKey(ref, version) },
      { kind: `provider-draft v${version}`, key: providerDraftKey(ref, version) },
      {
        kind: `reply v${version}`,
        key: replyKey(ref, version),
        idempotencyKey: providerIdempotencyKey(replyKey(ref, version)),
      },
    );
  }
  return { workflowId: inboundWorkflowId(ref), operations };
}

if (require.main === module) {
  runMain(async () => {
    let values;
    try {
      ({ values } = parseArgs({
        options: { inbox: { type: 'string' }, message: { type: 'string' }, json: { type: 'boolean' } },
        strict: true,
      }));
    } catch (error) {
      throw new SetupError(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    }
    if (!values.inbox || !values.message) throw new SetupError(`--inbox and --message are both needed\n${USAGE}`);
    const ids = messageIds({ inboxId: values.inbox, messageId: values.message });
    if (values.json) {
      console.log(JSON.stringify(ids, null, 2));
      return;
    }
    const width = Math.max(...ids.operations.map((o) => o.kind.length)) + 2;
    const lines = [`${'workflow id'.padEnd(width + 2)}${ids.workflowId}`, '', 'operation keys (table operations):'];
    for (const operation of ids.operations) {
      lines.push(`  ${operation.kind.padEnd(width)}${operation.key}`);
      if (operation.idempotencyKey)
        lines.push(`  ${''.padEnd(width)}AgentMail Idempotency-Key ${operation.idempotencyKey}`);
    }
    lines.push(
      '',
      'Look it up:',
      `  npm run temporal -- workflow describe --workflow-id ${ids.workflowId}`,
      `  npm run temporal -- workflow query --workflow-id ${ids.workflowId} --name operations`,
    );
    console.log(lines.join('\n'));
  });
}

import { createServer } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { loadTemporalConnection } from '../../lib/temporal-connection';
import { inboundWorkflowId } from '../../lib/hashing';
import { startInboundWorkflow } from '../../intake/start-workflow';
import { closeOnSignal } from './close-on-signal';

/**
 * A reference, not a product: the thinnest handler that starts our workflow. It reads the
 * payload's inbox and message ids and makes the ingress's one Temporal call (the same start, with
 * the same search attributes and policies) — no signature check, no database, no framework.
 * What it sustains is the Temporal server's ceiling for any ingress that starts a workflow per
 * webhook; the bench sets our ingress against it. PORT, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 * TEMPORAL_TASK_QUEUE.
 */
async function main(): Promise<void> {
  const { PORT = '3200', HOST = '127.0.0.1', TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE } = process.env;
  if (!TEMPORAL_ADDRESS || !TEMPORAL_NAMESPACE || !TEMPORAL_TASK_QUEUE)
    throw new Error('TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_TASK_QUEUE are required');
  // Temporal's environment configuration, as our processes read it (mTLS on the stack).
  const loaded = loadTemporalConnection(process.env);
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  const connection = await Connection.connect(loaded.settings.connectionOptions);
  const client = new Client({ connection, namespace: TEMPORAL_NAMESPACE });
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      let message: { inbox_id: string; message_id: string };
      try {
        ({ message } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message: typeof message });
      } catch {
        response.writeHead(400).end();
        return;
      }
      const deadline = new Date(Date.now() + 10_000);
      startInboundWorkflow(
        client,
        { taskQueue: TEMPORAL_TASK_QUEUE, deadline },
        {
          workflowId: inboundWorkflowId({ inboxId: message.inbox_id, messageId: message.message_id }),
          inboxId: message.inbox_id,
          messageId: message.message_id,
        },
      ).then(
        () => response.writeHead(204).end(),
        () => response.writeHead(500).end(),
      );
    });
  });
  server.listen(Number(PORT), HOST, () => console.log(JSON.stringify({ msg: 'start-only listening' })));
  closeOnSignal(server, () => connection.close());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

import { Context } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { fetchMessage } from '../agentmail/reads';
import { replayCompleted, runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { TicketProvider } from './ticket-provider';
import type { ActivityConfig } from '../../lib/config';

export interface TicketInput extends MessageRef {
  /** The ticket's operation key (…/ticket/v1), derived by the workflow; also the help desk's external id. */
  key: string;
  threadId: string;
  /** Why the ticket exists: answered by the agent, or skipped and why. Part of the request. */
  note: string;
}

export interface TicketDeps {
  store: OperationStore;
  agentmail: AgentMailClient;
  tickets: TicketProvider;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<ActivityConfig, 'OPERATION_LEASE_MS'>;
}

export async function openTicket(
  deps: TicketDeps,
  input: TicketInput,
): Promise<{ ticketId: string; operation: OperationReport }> {
  const { key, ...ticket } = input;
  // Opened before (by this run or an earlier one): that ticket stands, whatever note a new run's
  // decision would write (a rerun that now needs approval, say); replayed from the store first.
  const before = await replayCompleted<{ ticketId: string }>(deps.store, key, OperationKind.ticket);
  if (before) return { ticketId: before.result.ticketId, operation: before.operation };
  const request = {
    inboxId: input.inboxId,
    messageId: input.messageId,
    threadId: input.threadId,
    note: input.note,
    provider: deps.tickets.name,
  };
  const outcome = await runOperation<{ ticketId: string }>(
    deps.store,
    { key, kind: OperationKind.ticket, request, leaseMs: deps.config.OPERATION_LEASE_MS },
    async (attempt) => {
      const message = await fetchMessage(deps.agentmail, input);
      return deps.tickets.create(
        {
          ...ticket,
          externalId: key,
          subject: message.subject ?? '(no subject)',
          message: {
            from: message.from,
            text: message.extractedText ?? message.text ?? '',
            receivedAt: message.timestamp.toISOString(),
          },
        },
        // A resumed attempt may follow one that created the ticket: the provider looks before creating.
        { resumed: attempt.resumed, signal: Context.current().cancellationSignal },
      );
    },
  );
  return { ticketId: outcome.result.ticketId, operation: outcome.operation };
}

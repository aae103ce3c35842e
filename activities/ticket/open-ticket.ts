import { Context } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { fetchMessage } from '../agentmail/reads';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { TicketProvider } from './ticket-provider';
import type { StoredDraft } from '../draft/draft-store';
import type { ActivityConfig } from '../../lib/config';

export interface TicketInput extends MessageRef {
  /** The ticket's operation key (…/ticket/v1), derived by the workflow; also the help desk's external id. */
  key: string;
  threadId: string;
  /** Why the ticket exists: answered by the agent, or skipped and why. Part of the request. */
  note: string;
  /**
   * The stored draft this ticket follows, if any: its hand-off reason and the articles it was
   * given and cited are added to the note here, from the store, so they never pass through history.
   */
  draftKey?: string;
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
  const { key, draftKey, ...base } = input;
  // One ticket per message: once opened, a later run (a rerun after a failure, whose draft may have
  // come out differently) gets the same ticket back, whatever its note would say now.
  const opened = await deps.store.completed<{ ticketId: string }>(key, OperationKind.ticket);
  if (opened !== undefined)
    return { ticketId: opened.ticketId, operation: { key, kind: OperationKind.ticket, state: 'replayed' } };
  const draft =
    draftKey === undefined ? undefined : await deps.store.completed<StoredDraft>(draftKey, OperationKind.draft);
  const ticket = { ...base, note: draft ? noteWithDraft(input.note, draft) : input.note };
  const request = {
    inboxId: input.inboxId,
    messageId: input.messageId,
    threadId: input.threadId,
    note: ticket.note,
    provider: deps.tickets.name,
  };
  const outcome = await runOperation<{ ticketId: string }>(
    deps.store,
    { key, kind: OperationKind.ticket, request, leaseMs: deps.config.OPERATION_LEASE_MS },
    async (attempt) => {
      const message = await fetchMessage(deps.agentmail, base);
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

/** The internal note: why the ticket exists, then the hand-off's reason and the articles considered and cited. */
export function noteWithDraft(note: string, draft: StoredDraft): string {
  const lines = [note];
  if (draft.handoff) lines.push(`Handed off to a person: ${draft.handoff.reason}`);
  if (draft.considered !== undefined)
    lines.push(`Articles considered: ${draft.considered.length > 0 ? draft.considered.join(', ') : 'none matched'}`);
  if (draft.citations !== undefined && draft.citations.length > 0)
    lines.push(`Articles cited: ${draft.citations.join(', ')}`);
  return lines.join('\n');
}

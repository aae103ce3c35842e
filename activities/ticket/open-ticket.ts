import { Context } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { fetchMessage } from '../agentmail/reads';
import { runOperation } from '../operation-store/run-operation';
import type { OperationStore } from '../operation-store/store';
import type { TicketProvider } from './ticket-provider';
import type { ActivityConfig } from '../../lib/config';
import { storedDraft } from '../draft/draft-store';

/**
 * One ticket per conversation (an AgentMail thread): the thread's first message to get here opens
 * it, under the thread's key (inbox + thread, so two first messages racing make one), and every
 * inbound message, our reply and a skipped message's reason is a comment on it, each under its own
 * operation key.
 */

export interface TicketInput extends MessageRef {
  /** This message's entry on the thread's ticket (…/ticket/v1), derived by the workflow. */
  key: string;
  threadId: string;
  /** The thread's ticket (contract/keys.ts threadTicketKey), also the help desk's external id. */
  threadKey: string;
  /** A skipped message's reason, added as an internal note under `noteKey`; null when answered. */
  note: string | null;
  noteKey?: string;
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
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const leaseMs = deps.config.OPERATION_LEASE_MS;
  const provider = deps.tickets.name;
  const signal = Context.current().cancellationSignal;
  const outcome = await runOperation<{ ticketId: string }>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.ticket,
      request: { ...ref, threadId: input.threadId, threadKey: input.threadKey, provider },
      leaseMs,
    },
    async (attempt) => {
      const message = await fetchMessage(deps.agentmail, ref);
      const { ticketId } = await threadTicket(deps, input, message.subject ?? '(no subject)');
      await deps.tickets.addComment(
        {
          externalId: input.key,
          ticketId,
          kind: 'inbound',
          messageId: input.messageId,
          public: true,
          body: [
            `From: ${message.from}`,
            `Subject: ${message.subject ?? '(no subject)'}`,
            `Received: ${message.timestamp.toISOString()}`,
            `AgentMail message ${input.messageId}`,
            '',
            (message.extractedText ?? message.text ?? '').trim() || '(no text)',
          ].join('\n'),
          // A customer writing again reopens a ticket a person closed: the conversation goes on.
          reopen: true,
        },
        { resumed: attempt.resumed, signal },
      );
      return { ticketId };
    },
  );
  const { ticketId } = outcome.result;
  if (input.note !== null && input.noteKey)
    await addComment(deps, {
      key: input.noteKey,
      kind: OperationKind.ticketNote,
      ticketId,
      messageId: input.messageId,
      comment: 'note',
      body: input.note,
    });
  return { ticketId, operation: outcome.operation };
}

/** The thread's ticket, opened once whichever message of the thread gets here first. */
async function threadTicket(deps: TicketDeps, input: TicketInput, subject: string) {
  const request = { inboxId: input.inboxId, threadId: input.threadId, provider: deps.tickets.name };
  const opened = await runOperation<{ ticketId: string }>(
    deps.store,
    { key: input.threadKey, kind: OperationKind.threadTicket, request, leaseMs: deps.config.OPERATION_LEASE_MS },
    (attempt) =>
      deps.tickets.create(
        {
          externalId: input.threadKey,
          inboxId: input.inboxId,
          messageId: input.messageId,
          threadId: input.threadId,
          subject,
          note: 'A conversation with the support agent.',
        },
        // A resumed attempt may follow one that created the ticket: the provider looks before creating.
        { resumed: attempt.resumed, signal: Context.current().cancellationSignal },
      ),
  );
  return opened.result;
}

export interface ReplyCommentInput extends MessageRef {
  /** …/ticket-reply/v1 */
  key: string;
  ticketId: string;
  /** The draft that went out (its stored text is the comment). */
  draftKey: string;
  replyMessageId: string;
  /** The inbound messages the reply answers. */
  covers: string[];
}

/** Our sent reply, as a public comment on the thread's ticket. */
export async function commentReply(
  deps: TicketDeps,
  input: ReplyCommentInput,
): Promise<{ commentId: string; operation: OperationReport }> {
  const text = (await storedDraft(deps.store, input.draftKey)).text;
  const answered =
    input.covers.length > 1 ? `Answers ${input.covers.length} messages: ${input.covers.join(', ')}` : null;
  return addComment(deps, {
    key: input.key,
    kind: OperationKind.ticketReply,
    ticketId: input.ticketId,
    messageId: input.messageId,
    comment: 'reply',
    body: [`Replied (AgentMail message ${input.replyMessageId})`, ...(answered ? [answered] : []), '', text].join('\n'),
  });
}

async function addComment(
  deps: TicketDeps,
  spec: {
    key: string;
    kind: OperationKind;
    ticketId: string;
    messageId: string;
    comment: 'reply' | 'note';
    body: string;
  },
): Promise<{ commentId: string; operation: OperationReport }> {
  const outcome = await runOperation<{ commentId: string }>(
    deps.store,
    {
      key: spec.key,
      kind: spec.kind,
      request: {
        ticketId: spec.ticketId,
        messageId: spec.messageId,
        comment: spec.comment,
        provider: deps.tickets.name,
      },
      leaseMs: deps.config.OPERATION_LEASE_MS,
    },
    (attempt) =>
      deps.tickets.addComment(
        {
          externalId: spec.key,
          ticketId: spec.ticketId,
          kind: spec.comment,
          messageId: spec.messageId,
          public: spec.comment === 'reply',
          body: spec.body,
          reopen: false,
        },
        { resumed: attempt.resumed, signal: Context.current().cancellationSignal },
      ),
  );
  return { commentId: outcome.result.commentId, operation: outcome.operation };
}

import { Context } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import { type MessageRef, OperationKind, type OperationReport } from '../../contract';
import { fetchMessage } from '../agentmail/reads';
import { erasedFailure, runOperation } from '../operation-store/run-operation';
import * as metrics from '../../lib/metrics';
import type { OperationStore } from '../operation-store/store';
import type { TicketProvider } from './ticket-provider';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { storedDraft, type StoredDraft } from '../draft/draft-store';
import { foldSkippedTicket } from './skipped-fold';
import { ticketMailLines } from './mail-lines';
import { textCutNotice } from '../../knowledge/message-text';

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
  /**
   * A skipped message's optional ticket (TICKET_FOR_SKIPPED), with its skip reason: bounded per
   * inbox, counted on the inbox's open ticket past the limit (skipped-fold.ts) instead of opened.
   */
  fold?: { reason: string };
}

export interface TicketResult {
  /** The thread's ticket; null when this skipped message was counted on another ticket instead. */
  ticketId: string | null;
  /** The ticket key of the open ticket this skipped message was counted on. */
  foldedInto?: string;
}

export interface TicketDeps {
  db: Db;
  store: OperationStore;
  agentmail: AgentMailClient;
  tickets: TicketProvider;
  /** The worker's validated configuration, the part this step reads (lib/config.ts has the defaults). */
  config: Pick<
    ActivityConfig,
    'OPERATION_LEASE_MS' | 'TICKET_FOR_SKIPPED_PER_INBOX' | 'TICKET_FOR_SKIPPED_WINDOW' | 'DESK_PUBLIC_URL'
  >;
}

export async function openTicket(
  deps: TicketDeps,
  input: TicketInput,
): Promise<TicketResult & { operation: OperationReport }> {
  const ref: MessageRef = { inboxId: input.inboxId, messageId: input.messageId };
  const leaseMs = deps.config.OPERATION_LEASE_MS;
  const provider = deps.tickets.name;
  const signal = Context.current().cancellationSignal;
  const { fold } = input;
  const outcome = await runOperation<TicketResult>(
    deps.store,
    {
      key: input.key,
      kind: OperationKind.ticket,
      request: {
        ...ref,
        threadId: input.threadId,
        threadKey: input.threadKey,
        provider,
        ...(fold ? { fold: fold.reason } : {}),
      },
      leaseMs,
    },
    async (attempt): Promise<TicketResult> => {
      if (fold) {
        const folded = await foldSkippedTicket(
          deps.db,
          { ticketKey: input.key, inboxId: input.inboxId, reason: fold.reason },
          { perWindow: deps.config.TICKET_FOR_SKIPPED_PER_INBOX, windowMs: deps.config.TICKET_FOR_SKIPPED_WINDOW },
        );
        if (folded.folded) return { ticketId: null, foldedInto: folded.into };
      }
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
  if (ticketId !== null && input.note !== null && input.noteKey)
    await addComment(deps, {
      key: input.noteKey,
      kind: OperationKind.ticketNote,
      ticketId,
      messageId: input.messageId,
      comment: 'note',
      body: input.note,
    });
  return { ...outcome.result, operation: outcome.operation };
}

export interface DraftNoteInput extends MessageRef {
  /** …/ticket-note/v1: the message's one internal note. */
  key: string;
  ticketId: string;
  note: string;
  /** The stored draft the note speaks of: its hand-off reason and articles are read from the store here. */
  draftKey: string;
}

/**
 * An internal note that follows the draft (a hand-off): the reason and the articles considered
 * and cited, read from the store here so they never pass through history. Its request holds no
 * text, so a rerun whose draft came out otherwise replays the note that is there.
 */
export async function commentDraftNote(
  deps: TicketDeps,
  input: DraftNoteInput,
): Promise<{ commentId: string; operation: OperationReport }> {
  const draft = await deps.store.completed<StoredDraft>(input.draftKey, OperationKind.draft);
  return addComment(deps, {
    key: input.key,
    kind: OperationKind.ticketNote,
    ticketId: input.ticketId,
    messageId: input.messageId,
    comment: 'note',
    body: draft
      ? [noteWithDraft(input.note, draft), ...ticketMailLines(draft, input, deps.config.DESK_PUBLIC_URL)].join('\n')
      : input.note,
  });
}

/** The internal note: why, then the hand-off's reason and the articles considered and cited. */
export function noteWithDraft(note: string, draft: StoredDraft): string {
  const lines = [note];
  if (draft.handoff) lines.push(`Handed off to a person: ${draft.handoff.reason}`);
  if (draft.textCut) lines.push(textCutNotice(draft.textCut));
  if (draft.considered !== undefined)
    lines.push(`Articles considered: ${draft.considered.length > 0 ? draft.considered.join(', ') : 'none matched'}`);
  if (draft.citations !== undefined && draft.citations.length > 0)
    lines.push(`Articles cited: ${draft.citations.join(', ')}`);
  return lines.join('\n');
}

/**
 * The thread's ticket, opened once whichever message of the thread gets here first: under its own
 * operation key, or, for a provider keyed in the store (Postgres), by the provider's own upsert on
 * that key.
 */
async function threadTicket(deps: TicketDeps, input: TicketInput, subject: string) {
  const ticket = {
    externalId: input.threadKey,
    inboxId: input.inboxId,
    messageId: input.messageId,
    threadId: input.threadId,
    subject,
    note: 'A conversation with the support agent.',
  };
  const signal = Context.current().cancellationSignal;
  if (deps.tickets.keyedInStore) return deps.tickets.create(ticket, { resumed: true, signal });
  const request = { inboxId: input.inboxId, threadId: input.threadId, provider: deps.tickets.name };
  const opened = await runOperation<{ ticketId: string }>(
    deps.store,
    { key: input.threadKey, kind: OperationKind.threadTicket, request, leaseMs: deps.config.OPERATION_LEASE_MS },
    // A resumed attempt may follow one that created the ticket: the provider looks before creating.
    (attempt) => deps.tickets.create(ticket, { resumed: attempt.resumed, signal }),
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
  const draft = await storedDraft(deps.store, input.draftKey);
  const text = draft.text;
  const cited =
    draft.citations !== undefined && draft.citations.length > 0
      ? `Articles cited: ${draft.citations.join(', ')}`
      : null;
  const answered =
    input.covers.length > 1 ? `Answers ${input.covers.length} messages: ${input.covers.join(', ')}` : null;
  return addComment(deps, {
    key: input.key,
    kind: OperationKind.ticketReply,
    ticketId: input.ticketId,
    messageId: input.messageId,
    comment: 'reply',
    body: [
      `Replied (AgentMail message ${input.replyMessageId})`,
      ...(answered ? [answered] : []),
      ...(cited ? [cited] : []),
      ...ticketMailLines(draft, input, deps.config.DESK_PUBLIC_URL),
      '',
      text,
    ].join('\n'),
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
  const comment = {
    externalId: spec.key,
    ticketId: spec.ticketId,
    kind: spec.comment,
    messageId: spec.messageId,
    public: spec.comment === 'reply',
    body: spec.body,
    reopen: false,
  };
  const signal = Context.current().cancellationSignal;
  if (deps.tickets.keyedInStore) {
    // No claim here, so the erasure's tombstone is looked at here: an erased message gets no comment.
    if ((await deps.store.lookup(spec.key)).erased) throw erasedFailure(spec.key);
    // The comment's row is its record: added now, or there from an earlier attempt (a replay).
    const { commentId, added } = await deps.tickets.addComment(comment, { resumed: true, signal });
    const state = added === false ? 'replayed' : 'executed';
    metrics.operations.inc({ kind: spec.kind, status: state });
    return { commentId, operation: { key: spec.key, kind: spec.kind, state } };
  }
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
    (attempt) => deps.tickets.addComment(comment, { resumed: attempt.resumed, signal }),
  );
  return { commentId: outcome.result.commentId, operation: outcome.operation };
}

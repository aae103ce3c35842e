import {
  ApplicationFailure,
  type Client,
  type WorkflowHandle,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import {
  draftKey,
  FailureType,
  INBOUND_MESSAGE_WORKFLOW,
  type MessageRef,
  type ReviewInput,
  type ReviewState,
  reviewKey,
  reviewStateQuery,
  reviewUpdate,
  SearchAttributes,
} from '../contract';
import { OperationStore } from '../activities/operation-store/store';
import type { StoredDraft } from '../activities/draft/draft-store';
import type { StoredReview } from '../activities/draft/approval';
import type { AgentMailClient } from '../lib/agentmail';
import type { Db } from '../lib/db';
import { isAgentMailError, providerErrorText } from '../lib/provider-errors';
import { mayReview, type SignedIn } from './sessions';
import type { Citation, MessageView, Outcome, ThreadMessage } from './views';

/**
 * What the desk asks of Temporal, Postgres and AgentMail about one message: whether this reviewer
 * may see it, where it stands, its draft, the verdict that stands and the text that went (or will
 * go) out, the customer's thread; and the one call that changes anything, the `review` Update.
 * Texts come from Postgres (the operation store) and AgentMail, never from Temporal's history.
 */

export class NotFound extends Error {}

export interface Message extends MessageRef {
  workflowId: string;
  handle: WorkflowHandle;
}

/** What became of a verdict sent to the workflow. */
export type Submitted =
  | { kind: 'accepted' }
  /** Refused by the workflow: stale (another verdict, another revision) or invalid. */
  | { kind: 'refused'; stale: boolean; reason: string }
  /** The run has finished: a verdict was applied already. */
  | { kind: 'decided' }
  /**
   * No answer within the deadline. Temporal may have admitted the Update and may still apply it:
   * the verdict is neither confirmed nor refused, and the page must not say "nothing was changed".
   */
  | { kind: 'unconfirmed' };

export interface ReviewClientOptions {
  db: Db;
  temporal: Client;
  agentmail: AgentMailClient;
  /** How long to wait for Temporal (a query, an Update) before saying so. */
  deadlineMs: number;
}

/** How long the page after a verdict waits for the worker to record it (the text it approved). */
const RECORD_WAIT_MS = 3_000;

export class ReviewClient {
  private readonly store: OperationStore;

  constructor(private readonly options: ReviewClientOptions) {
    this.store = new OperationStore(options.db);
  }

  private withDeadline<T>(fn: () => Promise<T>): Promise<T> {
    return this.options.temporal.connection.withDeadline(Date.now() + this.options.deadlineMs, fn);
  }

  /** The message behind a workflow id, when this reviewer may see it; NotFound otherwise (also for other rights). */
  async messageOf(reviewer: SignedIn, workflowId: string): Promise<Message> {
    const handle = this.options.temporal.workflow.getHandle(workflowId);
    const description = await this.withDeadline(() => handle.describe()).catch((error: unknown) => {
      if (error instanceof WorkflowNotFoundError) throw new NotFound();
      throw error;
    });
    const inboxId = description.typedSearchAttributes.get(SearchAttributes.InboxId);
    const messageId = description.typedSearchAttributes.get(SearchAttributes.MessageId);
    if (description.type !== INBOUND_MESSAGE_WORKFLOW || !inboxId || !messageId || !mayReview(reviewer, inboxId))
      throw new NotFound();
    return { workflowId, inboxId, messageId, handle };
  }

  state(message: Message): Promise<ReviewState> {
    return this.withDeadline(() => message.handle.query(reviewStateQuery));
  }

  /** The stored text (and citations) of the draft awaiting a verdict, or null when none awaits. */
  async awaitingDraft(state: ReviewState): Promise<(StoredDraft & { citations?: unknown }) | null> {
    if (state.draftKey === null) return null;
    return (await this.store.completed<StoredDraft & { citations?: unknown }>(state.draftKey, 'draft')) ?? null;
  }

  /** Everything the message page shows. */
  async view(
    reviewer: SignedIn,
    workflowId: string,
    extra: Pick<MessageView, 'notice' | 'editing'>,
  ): Promise<MessageView> {
    const message = await this.messageOf(reviewer, workflowId);
    const state = await this.state(message);
    const [draft, thread, outcome] = await Promise.all([
      this.awaitingDraft(state),
      readThread(this.options.agentmail, message.inboxId, message.messageId),
      state.verdict === null ? null : this.outcome(message, state.verdict),
    ]);
    return {
      workflowId,
      inboxId: message.inboxId,
      state,
      draft: draft
        ? {
            text: draft.text,
            citations: citationsOf(draft.cited ?? draft.citations),
            language: draft.language?.detected ?? null,
            attachments: draft.attachments ?? [],
          }
        : null,
      thread,
      outcome,
      ...extra,
    };
  }

  /**
   * Where AgentMail serves one of the message's attachments (a signed link, valid about an hour):
   * the ticket's and the page's links come here, so only a reviewer of the inbox reaches the file.
   */
  async attachmentUrl(reviewer: SignedIn, workflowId: string, attachmentId: string): Promise<string> {
    const message = await this.messageOf(reviewer, workflowId);
    try {
      const attachment = await this.options.agentmail.inboxes.messages.getAttachment(
        message.inboxId,
        message.messageId,
        attachmentId,
      );
      return attachment.downloadUrl;
    } catch {
      throw new NotFound(`no attachment ${attachmentId} on this message`);
    }
  }

  /** Sends a verdict (the reviewer is the signed-in one, never a field of a form). */
  async submit(message: Message, review: ReviewInput): Promise<Submitted> {
    let timer: NodeJS.Timeout | undefined;
    // The deadline bounds the gRPC call; the timer bounds the whole wait (an interceptor, a slow resolve).
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error('no answer within the deadline')), this.options.deadlineMs);
    });
    try {
      await Promise.race([
        this.withDeadline(() => message.handle.executeUpdate(reviewUpdate, { args: [review] })),
        deadline,
      ]);
      return { kind: 'accepted' };
    } catch (error) {
      const failure = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
      if (
        failure instanceof ApplicationFailure &&
        (failure.type === FailureType.ReviewRefused || failure.type === FailureType.InvalidReview)
      )
        return { kind: 'refused', stale: failure.type === FailureType.ReviewRefused, reason: failure.message };
      // The run has finished (another verdict was applied and the reply went, or it was rejected).
      if (error instanceof WorkflowNotFoundError) return { kind: 'decided' };
      // Anything else (the deadline, Temporal unreachable mid-call): the Update may have been
      // admitted and may still be applied. Said as such, never as "nothing was changed".
      return { kind: 'unconfirmed' };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The verdict that stands, by whom (their name), and the text that went or will go out: the
   * reviewer's edit, or the draft they approved, from the store. Right after a verdict the worker
   * may not have recorded it yet: waited for a moment, then said.
   */
  private async outcome(message: Message, verdict: NonNullable<ReviewState['verdict']>): Promise<Outcome> {
    const [by, review] = await Promise.all([
      reviewerName(this.options.db, verdict.reviewer),
      this.recordedReview(message),
    ]);
    let text: string | null = null;
    if (review?.text != null) text = review.text;
    else if (review !== undefined)
      text = (await this.store.completed<StoredDraft>(draftKey(message, verdict.revision), 'draft'))?.text ?? null;
    return {
      verdict: verdict.verdict,
      by,
      revision: verdict.revision,
      edited: review === undefined ? null : review.text !== null,
      text,
    };
  }

  private async recordedReview(message: Message): Promise<StoredReview | undefined> {
    const key = reviewKey(message);
    const deadline = Date.now() + RECORD_WAIT_MS;
    for (;;) {
      const review = await this.store.completed<StoredReview>(key, 'review');
      if (review !== undefined || Date.now() > deadline) return review;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A reviewer's name for the page; an id that is no reviewer of ours (a proxy's user, a CLI verdict) as it is. */
async function reviewerName(db: Db, id: string): Promise<string> {
  const { rows } = await db.query<{ name: string }>('SELECT name FROM reviewers WHERE id = $1', [id]);
  return rows[0]?.name ?? (id.startsWith('proxy:') ? id.slice('proxy:'.length) : id);
}

/** The customer's thread, read from AgentMail now (never stored by us); a failure is said on the page. */
async function readThread(
  agentmail: AgentMailClient,
  inboxId: string,
  messageId: string,
): Promise<ThreadMessage[] | { problem: string }> {
  try {
    const message = await agentmail.inboxes.messages.get(inboxId, messageId);
    const thread = await agentmail.inboxes.threads.get(inboxId, message.threadId);
    return thread.messages
      .slice()
      .sort((a, b) => new Date(a.timestamp).getTime() - new Date(b.timestamp).getTime())
      .map((m) => ({
        from: m.from,
        at: new Date(m.timestamp),
        subject: m.subject ?? null,
        text: m.extractedText ?? m.text ?? m.preview ?? '(no text part)',
        isThisOne: m.messageId === messageId,
      }));
  } catch (error) {
    const why = isAgentMailError(error) ? providerErrorText(error) : 'no answer';
    return { problem: `The thread could not be read from AgentMail just now (${why}). Reload to try again.` };
  }
}

/** Cited articles, where the draft has them (the knowledge step stores them beside the text). */
function citationsOf(value: unknown): Citation[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item: unknown): Citation[] => {
    if (typeof item === 'string') return [{ title: item, url: null }];
    if (item && typeof item === 'object') {
      const record = item as Record<string, unknown>;
      const title = [record.title, record.id, record.url].find((v): v is string => typeof v === 'string');
      const url = typeof record.url === 'string' && /^https?:\/\//.test(record.url) ? record.url : null;
      const heading = typeof record.heading === 'string' ? record.heading : null;
      const text = typeof record.text === 'string' ? record.text : null;
      return title ? [{ title, url, heading, text }] : [];
    }
    return [];
  });
}

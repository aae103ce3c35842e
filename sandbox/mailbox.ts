import { randomUUID } from 'node:crypto';
import type { VirtualClock } from './clock';
import { ApiError } from './errors';
import type { Sequenced } from './paging';
import { omitUndefined, summarizeThread } from './views';
import type { AttachmentRaw, InboxRaw, MessageRaw, ThreadItemRaw } from './wire';

export const SANDBOX_DOMAIN = 'sandbox.agentmail.local';

/** RFC 5322 Message-IDs, angle brackets included, as AgentMail returns them. */
export const newMessageId = (): string => `<${randomUUID()}@${SANDBOX_DOMAIN}>`;

export interface NewMessage {
  inbox_id: string;
  from: string;
  to: string[];
  labels: string[];
  message_id?: string | undefined;
  thread_id?: string | undefined;
  cc?: string[] | undefined;
  bcc?: string[] | undefined;
  reply_to?: string[] | undefined;
  subject?: string | undefined;
  text?: string | undefined;
  html?: string | undefined;
  in_reply_to?: string | undefined;
  references?: string[] | undefined;
  headers?: Record<string, string> | undefined;
  /** Stored by the AttachmentStore beforehand: what the message lists. */
  attachments?: AttachmentRaw[] | undefined;
  /** When it arrived; default now. */
  timestamp?: string | undefined;
}

/** What left the building: the tests' proof of "exactly one email". */
export interface OutboxEntry {
  message: MessageRaw;
  endpoint: string;
  idempotency_key: string | null;
  sent_at: string;
}

/** Inboxes, messages and threads. One email to three inboxes is three messages: keys are per inbox. */
export class Mailbox {
  private seq = 0;
  private readonly inboxes = new Map<string, Sequenced<InboxRaw>>();
  private readonly messages = new Map<string, Sequenced<MessageRaw>>();
  readonly outbox: OutboxEntry[] = [];

  constructor(private readonly clock: VirtualClock) {}

  ensureInbox(inboxId: string, displayName?: string): InboxRaw {
    const existing = this.inboxes.get(inboxId);
    if (existing) return existing.value;
    const now = this.clock.iso();
    const inbox: InboxRaw = omitUndefined({
      pod_id: 'pod_sandbox',
      inbox_id: inboxId,
      email: inboxId,
      display_name: displayName,
      updated_at: now,
      created_at: now,
    });
    this.inboxes.set(inboxId, { seq: ++this.seq, value: inbox });
    return inbox;
  }

  inbox(inboxId: string): InboxRaw {
    const found = this.inboxes.get(inboxId);
    if (!found) throw ApiError.notFound('Inbox');
    return found.value;
  }

  listInboxes(): Sequenced<InboxRaw>[] {
    return [...this.inboxes.values()];
  }

  /** Joins a thread by thread_id, else by the message it replies to, else starts one. */
  addMessage(input: NewMessage): MessageRaw {
    this.inbox(input.inbox_id);
    const messageId = input.message_id ?? newMessageId();
    if (this.messages.has(key(input.inbox_id, messageId))) {
      throw ApiError.conflict(`message ${messageId} already exists in ${input.inbox_id}`, 'message_exists');
    }
    const parent = input.in_reply_to ? this.messages.get(key(input.inbox_id, input.in_reply_to))?.value : undefined;
    const now = this.clock.iso();
    const message: MessageRaw = omitUndefined({
      inbox_id: input.inbox_id,
      thread_id: input.thread_id ?? parent?.thread_id ?? randomUUID(),
      message_id: messageId,
      labels: [...new Set(input.labels)],
      timestamp: input.timestamp ? new Date(input.timestamp).toISOString() : now,
      from: input.from,
      reply_to: input.reply_to,
      to: input.to,
      cc: input.cc,
      bcc: input.bcc,
      subject: input.subject,
      preview: input.text?.slice(0, 100),
      text: input.text,
      html: input.html,
      extracted_text: input.text,
      in_reply_to: input.in_reply_to,
      references: input.references,
      headers: input.headers,
      size:
        Buffer.byteLength(`${input.subject ?? ''}${input.text ?? ''}${input.html ?? ''}`) +
        (input.attachments ?? []).reduce((sum, a) => sum + a.size, 0),
      attachments: input.attachments?.length ? input.attachments : undefined,
      updated_at: now,
      created_at: now,
    });
    this.messages.set(key(input.inbox_id, messageId), { seq: ++this.seq, value: message });
    return message;
  }

  message(inboxId: string, messageId: string): MessageRaw {
    this.inbox(inboxId);
    const found = this.messages.get(key(inboxId, messageId));
    if (!found) throw ApiError.notFound('Message');
    return found.value;
  }

  /** Oldest first. */
  messagesOf(inboxId: string): Sequenced<MessageRaw>[] {
    this.inbox(inboxId);
    return [...this.messages.values()].filter((m) => m.value.inbox_id === inboxId);
  }

  threadMessages(inboxId: string, threadId: string): Sequenced<MessageRaw>[] {
    const messages = this.messagesOf(inboxId).filter((m) => m.value.thread_id === threadId);
    if (messages.length === 0) throw ApiError.notFound('Thread');
    return messages;
  }

  /** Threads ordered by their latest message, oldest first; seq is that message's. */
  threadsOf(inboxId: string): Sequenced<ThreadItemRaw>[] {
    const latest = new Map<string, number>();
    for (const m of this.messagesOf(inboxId)) latest.set(m.value.thread_id, m.seq);
    return [...latest.entries()]
      .sort(([, a], [, b]) => a - b)
      .map(([threadId, seq]) => ({
        seq,
        value: summarizeThread(this.threadMessages(inboxId, threadId).map((m) => m.value)),
      }));
  }

  /** AgentMail's `DELETE …/messages/:id`: permanently (the sandbox keeps no trash). */
  deleteMessage(inboxId: string, messageId: string): void {
    this.message(inboxId, messageId);
    this.messages.delete(key(inboxId, messageId));
  }

  /** AgentMail's `DELETE …/threads/:id`: the thread and every message in it, permanently. */
  deleteThread(inboxId: string, threadId: string): void {
    for (const m of this.threadMessages(inboxId, threadId)) this.messages.delete(key(inboxId, m.value.message_id));
  }

  updateLabels(inboxId: string, messageId: string, add: string[], remove: string[]): MessageRaw {
    const message = this.message(inboxId, messageId);
    message.labels = [...new Set([...message.labels, ...add])].filter((l) => !remove.includes(l));
    message.updated_at = this.clock.iso();
    return message;
  }

  recordSent(message: MessageRaw, endpoint: string, idempotencyKey: string | null): void {
    this.outbox.push({
      message: structuredClone(message),
      endpoint,
      idempotency_key: idempotencyKey,
      sent_at: message.created_at,
    });
  }

  counts(): { inboxes: number; messages: number; sent: number } {
    return { inboxes: this.inboxes.size, messages: this.messages.size, sent: this.outbox.length };
  }

  reset(): void {
    this.inboxes.clear();
    this.messages.clear();
    this.outbox.length = 0;
  }
}

const key = (inboxId: string, id: string): string => JSON.stringify([inboxId, id]);

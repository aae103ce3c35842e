import type { MessageItemRaw, MessageRaw, ThreadItemRaw } from './wire';

/** Derived wire shapes: what lists and thread summaries show of the stored messages. */

export function toMessageItem(message: MessageRaw): MessageItemRaw {
  const { text: _text, html: _html, extracted_text: _extracted, reply_to: _replyTo, ...item } = message;
  return item;
}

/** messages: one thread, oldest first, at least one. */
export function summarizeThread(messages: MessageRaw[]): ThreadItemRaw {
  const first = messages[0];
  const last = messages[messages.length - 1];
  if (!first || !last) throw new Error('a thread has at least one message');
  const received = messages.filter((m) => !m.labels.includes('sent'));
  const sent = messages.filter((m) => m.labels.includes('sent'));
  return omitUndefined({
    inbox_id: first.inbox_id,
    thread_id: first.thread_id,
    labels: [...new Set(messages.flatMap((m) => m.labels))],
    timestamp: last.timestamp,
    received_timestamp: received[received.length - 1]?.timestamp,
    sent_timestamp: sent[sent.length - 1]?.timestamp,
    senders: [...new Set(messages.map((m) => m.from))],
    recipients: [...new Set(messages.flatMap((m) => [...m.to, ...(m.cc ?? [])]))],
    subject: first.subject,
    preview: last.preview,
    last_message_id: last.message_id,
    message_count: messages.length,
    size: messages.reduce((sum, m) => sum + m.size, 0),
    attachments: messages.some((m) => m.attachments) ? messages.flatMap((m) => m.attachments ?? []) : undefined,
    updated_at:
      messages
        .map((m) => m.updated_at)
        .sort()
        .at(-1) ?? last.updated_at,
    created_at: first.created_at,
  });
}

/** Absent fields stay absent on the wire instead of turning into `"x": undefined`. */
export function omitUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

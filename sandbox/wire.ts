/**
 * AgentMail's JSON shapes on the wire (snake_case), copied field for field from the SDK's
 * serializers (node_modules/agentmail/dist/cjs/serialization). Timestamps are ISO 8601 strings;
 * the SDK turns them into Dates. Optional fields are omitted rather than sent as null.
 */

export interface MessageRaw {
  inbox_id: string;
  thread_id: string;
  message_id: string;
  labels: string[];
  timestamp: string;
  from: string;
  reply_to?: string[];
  to: string[];
  cc?: string[];
  bcc?: string[];
  subject?: string;
  preview?: string;
  text?: string;
  html?: string;
  extracted_text?: string;
  in_reply_to?: string;
  references?: string[];
  headers?: Record<string, string>;
  size: number;
  /** serialization/resources/attachments/types/Attachment: metadata only, never the bytes. */
  attachments?: AttachmentRaw[];
  updated_at: string;
  created_at: string;
}

export interface AttachmentRaw {
  attachment_id: string;
  filename?: string;
  size: number;
  content_type?: string;
  content_disposition?: 'inline' | 'attachment';
  content_id?: string;
}

/** The list shape: a Message without bodies and reply_to (serialization/.../MessageItem). */
export type MessageItemRaw = Omit<MessageRaw, 'text' | 'html' | 'extracted_text' | 'reply_to'>;

export interface ThreadItemRaw {
  inbox_id: string;
  thread_id: string;
  labels: string[];
  timestamp: string;
  received_timestamp?: string;
  sent_timestamp?: string;
  senders: string[];
  recipients: string[];
  subject?: string;
  preview?: string;
  last_message_id: string;
  message_count: number;
  size: number;
  attachments?: AttachmentRaw[];
  updated_at: string;
  created_at: string;
}

/** GET thread: the summary plus one page of its messages, oldest first. */
export interface ThreadRaw extends ThreadItemRaw {
  count: number;
  limit?: number;
  next_page_token?: string;
  messages: MessageRaw[];
}

export interface DraftRaw {
  inbox_id: string;
  draft_id: string;
  client_id?: string;
  labels: string[];
  reply_to?: string[];
  to?: string[];
  cc?: string[];
  bcc?: string[];
  subject?: string;
  preview?: string;
  text?: string;
  html?: string;
  in_reply_to?: string;
  references?: string[];
  send_at?: string;
  updated_at: string;
  created_at: string;
}

export interface InboxRaw {
  pod_id: string;
  inbox_id: string;
  email: string;
  display_name?: string;
  updated_at: string;
  created_at: string;
}

export interface WebhookRaw {
  webhook_id: string;
  url: string;
  event_types?: string[];
  inbox_ids?: string[];
  secret: string;
  enabled: boolean;
  updated_at: string;
  created_at: string;
}

/** serialization/resources/events/types/MessageReceivedEvent. */
export interface MessageReceivedEventRaw {
  type: 'event';
  event_type: 'message.received';
  event_id: string;
  message: MessageRaw;
  thread: ThreadItemRaw;
}

export interface SendMessageResponseRaw {
  message_id: string;
  thread_id: string;
}

export interface Page<T> {
  count: number;
  limit: number;
  next_page_token?: string;
  items: T[];
}

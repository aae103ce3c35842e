import { ApplicationFailure } from '@temporalio/activity';
import { AgentMail, type AgentMailClient } from 'agentmail';
import { LRUCache } from 'lru-cache';
import { FailureType, type MessageRef } from '../../contract';
import { providerFailure } from './failures';

/** Reads from AgentMail (no effect, no key): the message and its thread, by id. */

/**
 * One workflow reads its message in up to four activities (decide, draft, ticket, send), mostly
 * on the same worker within a second or two. A received message's content does not change, so a
 * small cache per client turns those reads into one GET (each costs the worker a request and the
 * SDK's response parsing). Only labels change — we add "replied" at the end — and the one reader
 * of labels is the decision, which runs first and is recorded; entries also expire after a
 * minute. Failures are not cached. Callers must not modify the returned message.
 */
const messageCaches = new WeakMap<AgentMailClient, LRUCache<string, AgentMail.Message>>();
const MESSAGE_CACHE = { max: 2_000, ttl: 60_000 };

export async function fetchMessage(client: AgentMailClient, ref: MessageRef): Promise<AgentMail.Message> {
  let cache = messageCaches.get(client);
  if (!cache) messageCaches.set(client, (cache = new LRUCache(MESSAGE_CACHE)));
  const cacheKey = `${ref.inboxId}\n${ref.messageId}`;
  const cached = cache.get(cacheKey);
  if (cached) return cached;
  try {
    const message = withoutControlCharacters(await client.inboxes.messages.get(ref.inboxId, ref.messageId));
    cache.set(cacheKey, message);
    return message;
  } catch (error) {
    throw asReadFailure(error, `message ${ref.messageId} in inbox ${ref.inboxId}`);
  }
}

export async function fetchThread(
  client: AgentMailClient,
  inboxId: string,
  threadId: string,
): Promise<AgentMail.Thread> {
  try {
    return await client.inboxes.threads.get(inboxId, threadId);
  } catch (error) {
    throw asReadFailure(error, `thread ${threadId} in inbox ${inboxId}`);
  }
}

/** A missing message will not appear by retrying; the rest as provider-errors.ts says (never the body). */
function asReadFailure(error: unknown, what: string): unknown {
  if (error instanceof AgentMail.NotFoundError) {
    return ApplicationFailure.create({
      type: FailureType.MessageNotFound,
      message: `AgentMail has no ${what}`,
      nonRetryable: true,
    });
  }
  return providerFailure(error, `reading ${what}`);
}

/** `"Ada Lovelace" <ada@example.com>` → `ada@example.com`. */
export function emailAddress(mailbox: string): string {
  const angled = /<([^<>]+)>\s*$/.exec(mailbox);
  return (angled?.[1] ?? mailbox).trim().toLowerCase();
}

/** Header lookup is case-insensitive in email (RFC 5322). */
export function header(message: Pick<AgentMail.Message, 'headers'>, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(message.headers ?? {})) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

// eslint-disable-next-line no-control-regex -- finding control characters is this pattern's purpose.
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g;

/**
 * The sender writes the subject and the text: C0 control characters (U+0000 above all, which
 * Postgres's text and jsonb cannot hold) would fail the ticket's insert and any draft that quotes
 * them, so a message could never be answered. They carry no meaning in a reply or a ticket; tab,
 * line feed and carriage return stay. Done once, where the message is read, for every reader.
 */
function withoutControlCharacters(message: AgentMail.Message): AgentMail.Message {
  const clean = (text: string | undefined) => text?.replace(CONTROL, '');
  return {
    ...message,
    ...(message.subject !== undefined ? { subject: clean(message.subject) } : {}),
    ...(message.text !== undefined ? { text: clean(message.text) } : {}),
    ...(message.extractedText !== undefined ? { extractedText: clean(message.extractedText) } : {}),
  };
}

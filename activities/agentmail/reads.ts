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

/** This client's cache of one kind (a cache per client: tests run clients of several sandboxes). */
function cacheOf<V extends object>(
  caches: WeakMap<AgentMailClient, LRUCache<string, V>>,
  client: AgentMailClient,
  options: LRUCache.Options<string, V, unknown>,
): LRUCache<string, V> {
  let cache = caches.get(client);
  if (!cache) caches.set(client, (cache = new LRUCache(options)));
  return cache;
}
const messageCacheKey = (ref: MessageRef) => `${ref.inboxId}\n${ref.messageId}`;

export async function fetchMessage(client: AgentMailClient, ref: MessageRef): Promise<AgentMail.Message> {
  const cached = cacheOf(messageCaches, client, MESSAGE_CACHE).get(messageCacheKey(ref));
  if (cached) return cached;
  try {
    return remember(client, ref, await client.inboxes.messages.get(ref.inboxId, ref.messageId));
  } catch (error) {
    throw asReadFailure(error, `message ${ref.messageId} in inbox ${ref.inboxId}`);
  }
}

function remember(client: AgentMailClient, ref: MessageRef, read: AgentMail.Message): AgentMail.Message {
  const message = withoutControlCharacters(read);
  cacheOf(messageCaches, client, MESSAGE_CACHE).set(messageCacheKey(ref), message);
  return message;
}

/**
 * A thread's read, kept for a moment: the decision reads its message through the thread when the
 * run knows the thread (fetchMessageInThread), and the message's turn, asked in the same workflow
 * task a few milliseconds later (activities/turns/take-turn.ts), takes that read instead of a
 * second GET (recentThread). Only that caller, which says how old a read it accepts and works from
 * when it was read, gets a kept one; the draft and the send's reconciliation, which must see what
 * came since, always read afresh.
 */
interface ThreadRead {
  thread: AgentMail.Thread;
  /** When the read was asked for (this worker's clock): what it holds came no later. */
  readAt: number;
}
const threadCaches = new WeakMap<AgentMailClient, LRUCache<string, ThreadRead>>();
const THREAD_CACHE = { max: 2_000, ttl: 10_000 };

export async function fetchThread(
  client: AgentMailClient,
  inboxId: string,
  threadId: string,
): Promise<AgentMail.Thread> {
  return (await readThread(client, inboxId, threadId)).thread;
}

/**
 * The thread as read at most `maxAgeMs` ago and holding `messageId` (kept from an earlier read, or
 * read now), and when. A kept read must hold the message: one from before it came (another message's
 * decision, when this one's read its message from the cache) is no view of the thread for it.
 */
export async function recentThread(
  client: AgentMailClient,
  ref: MessageRef & { threadId: string },
  maxAgeMs: number,
): Promise<ThreadRead> {
  const kept = cacheOf(threadCaches, client, THREAD_CACHE).get(threadCacheKey(ref.inboxId, ref.threadId));
  if (kept && Date.now() - kept.readAt <= maxAgeMs && kept.thread.messages.some((m) => m.messageId === ref.messageId))
    return kept;
  return readThread(client, ref.inboxId, ref.threadId);
}

const threadCacheKey = (inboxId: string, threadId: string) => `${inboxId}\n${threadId}`;

async function readThread(client: AgentMailClient, inboxId: string, threadId: string): Promise<ThreadRead> {
  try {
    const readAt = Date.now();
    const read = { thread: await client.inboxes.threads.get(inboxId, threadId), readAt };
    cacheOf(threadCaches, client, THREAD_CACHE).set(threadCacheKey(inboxId, threadId), read);
    return read;
  } catch (error) {
    throw asReadFailure(error, `thread ${threadId} in inbox ${inboxId}`);
  }
}

/**
 * The message, read through its thread when the caller has the thread's id (the ingress's
 * `ThreadId`, from the webhook): one GET that also serves the turn's read of the thread
 * (recentThread). The id is a hint, not trusted: the message is taken from the thread only when it
 * is there, of this inbox and thread, with its headers (the decision reads them); otherwise, and
 * when the thread cannot be read, the message is read by itself, as without a hint.
 */
export async function fetchMessageInThread(
  client: AgentMailClient,
  ref: MessageRef,
  threadId: string | undefined,
): Promise<AgentMail.Message> {
  if (
    threadId === undefined ||
    threadId === '' ||
    cacheOf(messageCaches, client, MESSAGE_CACHE).has(messageCacheKey(ref))
  )
    return fetchMessage(client, ref);
  const thread = await fetchThread(client, ref.inboxId, threadId).catch(() => undefined);
  const found = thread?.messages.find(
    (m) =>
      m.messageId === ref.messageId && m.inboxId === ref.inboxId && m.threadId === threadId && m.headers !== undefined,
  );
  if (found === undefined) return fetchMessage(client, ref);
  return remember(client, ref, found);
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

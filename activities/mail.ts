import { ApplicationFailure } from '@temporalio/activity';
import { AgentMail, AgentMailError, type AgentMailClient } from 'agentmail';
import type { MessageRef } from '../lib/keys';
import { FailureType } from '../workflows/shared';

/** Reads from AgentMail (no effect, no key): the message and its thread, by id. */

export async function fetchMessage(client: AgentMailClient, ref: MessageRef): Promise<AgentMail.Message> {
  try {
    return await client.inboxes.messages.get(ref.inboxId, ref.messageId);
  } catch (error) {
    throw asReadFailure(error, `message ${ref.messageId} in inbox ${ref.inboxId}`);
  }
}

export async function fetchThread(client: AgentMailClient, inboxId: string, threadId: string): Promise<AgentMail.Thread> {
  try {
    return await client.inboxes.threads.get(inboxId, threadId);
  } catch (error) {
    throw asReadFailure(error, `thread ${threadId} in inbox ${inboxId}`);
  }
}

/** A missing message will not appear by retrying; anything else (5xx, timeout) may pass. */
function asReadFailure(error: unknown, what: string): unknown {
  if (error instanceof AgentMail.NotFoundError) {
    return ApplicationFailure.create({ type: FailureType.MessageNotFound, message: `AgentMail has no ${what}`, nonRetryable: true });
  }
  if (error instanceof AgentMailError && error.statusCode === 401) {
    return ApplicationFailure.create({ type: 'AgentMailUnauthorized', message: 'AgentMail rejected the API key (401): check AGENTMAIL_API_KEY', nonRetryable: false });
  }
  return error;
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

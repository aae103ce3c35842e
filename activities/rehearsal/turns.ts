import { mailboxOf } from '../agentmail/mailbox';
import { bareAddress } from '../agentmail/recipients';

/**
 * The turn rules as far as they are a pure function of the thread's messages (docs/conversations.md):
 * a burst — a sender's messages each within REPLY_COALESCE_MS of the one before, with no message of
 * ours between them — is answered once, by its newest message, whose reply covers the others. Bursts
 * coalesce per sender mailbox: a Cc'd colleague's reply-all never absorbs the customer's message.
 * What needs the live row (a turn held for days behind an approval) is not rehearsed.
 */

export interface TurnMessage {
  messageId: string;
  from: string;
  labels: string[];
  timestamp: Date;
}

export type RehearsedTurn = { kind: 'go'; covers: string[] } | { kind: 'covered'; by: string };

const senderMailbox = (m: TurnMessage) => {
  const bare = bareAddress(m.from);
  return bare === null ? m.from.trim().toLowerCase() : mailboxOf(bare);
};
const ours = (m: TurnMessage) => m.labels.includes('sent');
const byTime = (a: TurnMessage, b: TurnMessage) =>
  a.timestamp.getTime() - b.timestamp.getTime() || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0);

export function rehearsedTurn(thread: readonly TurnMessage[], messageId: string, coalesceMs: number): RehearsedTurn {
  const ordered = [...thread].sort(byTime);
  const index = ordered.findIndex((m) => m.messageId === messageId);
  const message = ordered[index];
  if (message === undefined) return { kind: 'go', covers: [messageId] };
  const sender = senderMailbox(message);
  // The same sender's messages around this one, up to a message of ours either way.
  const burst: TurnMessage[] = [message];
  for (let i = index - 1; i >= 0; i--) {
    const m = ordered[i]!;
    if (ours(m)) break;
    if (senderMailbox(m) !== sender) continue;
    if (burst[0]!.timestamp.getTime() - m.timestamp.getTime() > coalesceMs) break;
    burst.unshift(m);
  }
  for (let i = index + 1; i < ordered.length; i++) {
    const m = ordered[i]!;
    if (ours(m)) break;
    if (senderMailbox(m) !== sender) continue;
    if (m.timestamp.getTime() - burst[burst.length - 1]!.timestamp.getTime() > coalesceMs) break;
    burst.push(m);
  }
  const newest = burst[burst.length - 1]!;
  if (newest.messageId !== messageId) return { kind: 'covered', by: newest.messageId };
  return { kind: 'go', covers: burst.map((m) => m.messageId) };
}

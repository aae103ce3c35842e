import type { AgentMail } from 'agentmail';
import { acknowledgmentKey, type MessageRef, replyKey } from '../../contract';
import type { Db } from '../../lib/db';

/**
 * A person takes over: a message of ours in the thread that the agent did not send (a teammate's
 * answer from AgentMail's console, or a help desk sending through the inbox) means a person is
 * answering, and the customer's later messages get no automatic reply until a person hands the thread
 * back (handBackThread: the desk, `npm run handback`), or, with HANDBACK_AFTER, until the thread has
 * been quiet on our side that long.
 */

type ThreadMessage = Pick<AgentMail.Message, 'messageId' | 'timestamp' | 'labels' | 'inReplyTo'>;

/** What the agent sends in reply to a message: its reply (either version) and its acknowledgment. */
const agentKeys = (ref: MessageRef): string[] => [replyKey(ref, 1), replyKey(ref, 2), acknowledgmentKey(ref)];

/** Whether every one of these sent messages is the agent's: a reply under the reply key of the message it answers. */
export async function agentSent(db: Db, inboxId: string, sent: readonly ThreadMessage[]): Promise<boolean> {
  if (sent.length === 0) return true;
  const keys = sent.flatMap((m) => (m.inReplyTo ? agentKeys({ inboxId, messageId: m.inReplyTo }) : []));
  if (keys.length === 0) return false;
  // Ours: the send recorded this message's id, or is still in flight for the message it answers (the
  // row completes just after AgentMail accepted the email).
  const { rows } = await db.query<{ operation_key: string; status: string; message_id: string | null }>(
    `SELECT operation_key, status, result->>'messageId' AS message_id FROM operations WHERE operation_key = ANY($1)`,
    [keys],
  );
  return sent.every((m) =>
    rows.some(
      (r) =>
        m.inReplyTo !== undefined &&
        m.inReplyTo !== null &&
        agentKeys({ inboxId, messageId: m.inReplyTo }).includes(r.operation_key) &&
        (r.status === 'processing' || r.message_id === m.messageId),
    ),
  );
}

/** Whether a person answers this thread now: a message of ours the agent did not send, not handed back since. */
export async function personAnswering(
  db: Db,
  thread: MessageRef & { threadId: string },
  messages: readonly ThreadMessage[],
  handbackAfterMs: number | undefined,
  now = Date.now(),
): Promise<boolean> {
  const sent = messages.filter((m) => m.labels.includes('sent'));
  const persons: ThreadMessage[] = [];
  for (const m of sent) if (!(await agentSent(db, thread.inboxId, [m]))) persons.push(m);
  if (persons.length === 0) return false;
  const lastPersonAt = Math.max(...persons.map((m) => m.timestamp.getTime()));
  if (handbackAfterMs !== undefined && now - lastPersonAt >= handbackAfterMs) return false;
  const { rows } = await db.query<{ handed_back_at: Date }>(
    `SELECT max(handed_back_at) AS handed_back_at FROM thread_handbacks WHERE inbox_id = $1 AND thread_id = $2`,
    [thread.inboxId, thread.threadId],
  );
  const handedBackAt = rows[0]?.handed_back_at;
  return !(handedBackAt instanceof Date && handedBackAt.getTime() >= lastPersonAt);
}

/**
 * A person hands the thread back to the agent: from now on its customer's messages are answered
 * automatically again (until a person answers in it again). What the desk's "let the agent answer
 * this thread again" button and `npm run handback` call. `by` names who did it (the reviewer's id).
 */
export async function handBackThread(
  db: Db,
  input: { inboxId: string; threadId: string; by: string },
): Promise<{ handedBackAt: Date }> {
  if (input.inboxId.trim() === '' || input.threadId.trim() === '' || input.by.trim() === '')
    throw new Error('handBackThread needs an inbox id, a thread id and who hands it back');
  const { rows } = await db.query<{ handed_back_at: Date }>(
    `INSERT INTO thread_handbacks (inbox_id, thread_id, handed_back_by) VALUES ($1, $2, $3) RETURNING handed_back_at`,
    [input.inboxId, input.threadId, input.by],
  );
  return { handedBackAt: rows[0]!.handed_back_at };
}

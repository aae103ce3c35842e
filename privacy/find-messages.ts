import type { AgentMail, AgentMailClient } from 'agentmail';
import { mailboxOf } from '../activities/agentmail/mailbox';
import { emailAddress } from '../activities/agentmail/reads';
import { keyPart } from '../contract';
import { inboundWorkflowId } from '../lib/hashing';

/**
 * Which messages are a customer's, across inboxes: AgentMail lists every inbox's messages (ids,
 * senders, recipients, labels), and a message is theirs when its sender is their mailbox, compared
 * by the project's one function (mailboxOf: case, `+tag`, Gmail's dots). Our replies to them are
 * listed beside, for AgentMail's copy. The intake and the operation store hold ids only, so
 * AgentMail is where "whose is it" can be told; what it no longer holds, an earlier (interrupted)
 * run of the same erasure has already written down in its plan (privacy/erase.ts).
 */

export interface PlannedMessage {
  inboxId: string;
  messageId: string;
  threadId: string | null;
  workflowId: string;
  /** `<inbox>/<message>/`: every operation key of the message starts so (contract/keys.ts). */
  keyPrefix: string;
}

export interface PlannedThread {
  inboxId: string;
  threadId: string;
  /** Every message of it is theirs or ours: AgentMail's thread can go whole; else message by message. */
  onlyTheirs: boolean;
}

/** What an erasure found, written down before anything is erased: ids only. */
export interface ErasurePlan {
  inboxes: string[];
  messages: PlannedMessage[];
  /** Our own replies to them (label `sent`, addressed to their mailbox). */
  ourReplies: Array<{ inboxId: string; messageId: string; threadId: string | null }>;
  threads: PlannedThread[];
  /** The help desk's ticket ids of their threads, read before the operation results are erased (privacy/erase.ts). */
  tickets?: { own: string[]; shared: string[] };
}

/** The operation keys' prefix of one message: `<inbox>/<message>/` as contract/keys.ts builds keys. */
export const keyPrefixOf = (inboxId: string, messageId: string): string => `${keyPart(inboxId)}/${keyPart(messageId)}/`;

/** Every inbox of the organisation, every page. */
export async function allInboxes(agentmail: AgentMailClient): Promise<string[]> {
  const ids: string[] = [];
  let pageToken: string | undefined;
  do {
    const page = await agentmail.inboxes.list({ limit: 100, ...(pageToken ? { pageToken } : {}) });
    ids.push(...page.inboxes.map((inbox) => inbox.inboxId));
    pageToken = page.nextPageToken ?? undefined;
  } while (pageToken);
  return ids.sort();
}

async function* inboxMessages(agentmail: AgentMailClient, inboxId: string): AsyncGenerator<AgentMail.MessageItem> {
  let pageToken: string | undefined;
  do {
    const page = await agentmail.inboxes.messages.list(inboxId, { limit: 100, ...(pageToken ? { pageToken } : {}) });
    yield* page.messages;
    pageToken = page.nextPageToken ?? undefined;
  } while (pageToken);
}

const addresses = (list: string[] | string | undefined): string[] =>
  (Array.isArray(list) ? list : list ? [list] : []).map(emailAddress);

export async function findMessages(
  agentmail: AgentMailClient,
  address: string,
  inboxes: string[],
): Promise<ErasurePlan> {
  const mailbox = mailboxOf(emailAddress(address));
  const isTheirs = (raw: string) => mailboxOf(raw) === mailbox;
  const plan: ErasurePlan = { inboxes, messages: [], ourReplies: [], threads: [] };
  for (const inboxId of inboxes) {
    const byThread = new Map<string, { theirs: number; ours: number; others: number }>();
    const count = (threadId: string, who: 'theirs' | 'ours' | 'others') => {
      const counts = byThread.get(threadId) ?? { theirs: 0, ours: 0, others: 0 };
      counts[who] += 1;
      byThread.set(threadId, counts);
    };
    const sentToThem: PlannedMessage[] = [];
    for await (const item of inboxMessages(agentmail, inboxId)) {
      const sent = item.labels.includes('sent');
      if (sent) {
        count(item.threadId, 'ours');
        if (addresses(item.to).some(isTheirs))
          sentToThem.push({ ...messageOf(inboxId, item.messageId), threadId: item.threadId });
        continue;
      }
      const theirs = addresses(item.from).some(isTheirs);
      count(item.threadId, theirs ? 'theirs' : 'others');
      if (theirs) plan.messages.push({ ...messageOf(inboxId, item.messageId), threadId: item.threadId });
    }
    plan.ourReplies.push(
      ...sentToThem.map(({ inboxId: i, messageId, threadId }) => ({ inboxId: i, messageId, threadId })),
    );
    for (const [threadId, counts] of byThread) {
      if (counts.theirs === 0) continue;
      plan.threads.push({ inboxId, threadId, onlyTheirs: counts.others === 0 });
    }
  }
  return plan;
}

function messageOf(inboxId: string, messageId: string): PlannedMessage {
  return {
    inboxId,
    messageId,
    threadId: null,
    workflowId: inboundWorkflowId({ inboxId, messageId }),
    keyPrefix: keyPrefixOf(inboxId, messageId),
  };
}

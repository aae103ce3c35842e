import type { AgentMailClient } from 'agentmail';
import type { MessageRef } from '../lib/keys';

/** Labels are set-like (add "replied", remove "unread"), so this effect is idempotent by nature: no key. */
export async function labelMessage(agentmail: AgentMailClient, ref: MessageRef): Promise<void> {
  await agentmail.inboxes.messages.update(ref.inboxId, ref.messageId, { addLabels: ['replied'], removeLabels: ['unread'] });
}

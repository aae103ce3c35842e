import { log } from '@temporalio/activity';
import { AgentMail, type AgentMailClient } from 'agentmail';
import type { MessageRef } from '../../contract';
import { providerFailure } from '../agentmail/failures';

/**
 * Labels are set-like (add "replied", remove "unread"), so this effect is idempotent by nature: no key.
 * A message deleted at AgentMail after it was answered has nothing left to label: retrying a 404
 * would keep the workflow open forever, and failing it would report a sent reply as failed.
 */
export async function labelMessage(agentmail: AgentMailClient, ref: MessageRef): Promise<void> {
  try {
    await agentmail.inboxes.messages.update(ref.inboxId, ref.messageId, {
      addLabels: ['replied'],
      removeLabels: ['unread'],
    });
  } catch (error) {
    if (!(error instanceof AgentMail.NotFoundError)) throw providerFailure(error, `labelling ${ref.messageId}`);
    log.warn('message no longer at AgentMail: not labelled', { inboxId: ref.inboxId, messageId: ref.messageId });
  }
}

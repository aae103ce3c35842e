import type { Drafter, DraftRequest } from './drafter';

/**
 * The default drafter: deterministic, no network, so the system works out of the box and
 * tests are reproducible. It acknowledges the message and promises a human follow-up.
 */
export class OfflineDrafter implements Drafter {
  readonly name = 'offline';

  async draft(request: DraftRequest): Promise<string> {
    const subject = request.subject.trim() || 'your message';
    const earlier =
      request.thread.length > 0
        ? ` This continues our earlier conversation (${request.thread.length} earlier message${request.thread.length === 1 ? '' : 's'}).`
        : '';
    return [
      'Hello,',
      '',
      `Thank you for writing to us about "${subject}". We have received your message and opened a ticket for it.${earlier}`,
      'A member of our team will follow up shortly.',
      '',
      'Best regards,',
      'The support team',
    ].join('\n');
  }
}

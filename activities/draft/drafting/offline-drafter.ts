import type { DraftAnswer, Drafter, DraftRequest } from './drafter';

/**
 * The default drafter: deterministic, no network, so the system works out of the box and
 * tests are reproducible. It acknowledges the message and promises a human follow-up. With a
 * knowledge base it speaks the same structured answer as a model: it points to the best-matching
 * article and cites it, or hands off when no article matches or the best is below the relevance floor.
 */
export class OfflineDrafter implements Drafter {
  readonly name = 'offline';

  async draft(request: DraftRequest): Promise<DraftAnswer> {
    const subject = request.subject.trim() || 'your message';
    // A conversation goes on only once we have written in it; the customer's own unanswered
    // messages before this one are the same burst, which this reply answers too.
    const replied = request.thread.some((m) => m.direction === 'outbound');
    const plural = (n: number) => `${n} earlier message${n === 1 ? '' : 's'}`;
    const earlier =
      request.thread.length === 0
        ? ''
        : replied
          ? ` This continues our earlier conversation (${plural(request.thread.length)}).`
          : ` It answers your ${plural(request.thread.length)} too.`;
    const [best] = request.articles;
    const pointer = best ? [`Our help article "${best.title}" may already answer your question.`] : [];
    const reply = [
      'Hello,',
      '',
      `Thank you for writing to us about "${subject}". We have received your message and opened a ticket for it.${earlier}`,
      ...pointer,
      'A member of our team will follow up shortly.',
      '',
      'Best regards,',
      'The support team',
    ].join('\n');
    if (request.knowledge && !best)
      return { reply, citations: [], handoff: { reason: 'no article in the knowledge base matches this message' } };
    // Below the relevance floor the best article is not an answer: a person answers (issue 37).
    if (request.knowledge && request.relevance?.below)
      return { reply, citations: [], handoff: { reason: request.relevance.reason ?? 'no article is relevant enough' } };
    return { reply, citations: best ? [best.id] : [], handoff: null };
  }
}

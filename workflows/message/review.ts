import { ApplicationFailure, condition, log, setHandler } from '@temporalio/workflow';
import {
  draftProblem,
  FailureType,
  type ReplyStatus,
  type ReviewInput,
  reviewSignal,
  type ReviewState,
  reviewStateQuery,
  reviewUpdate,
  type ReviewVerdict,
} from '../../contract';

/**
 * Receives a reviewer's verdict by Update (answers whether it was accepted) or by Signal (what
 * the Web UI and `temporal workflow signal` send). A verdict is accepted only while one is
 * awaited, for the revision awaiting it, and only once; never kept for later. The Update's
 * validator refuses anything else (`ReviewRefused`, naming the current ReplyStatus or the verdict
 * that stands), so a refused Update leaves no trace in history; a refused Signal is logged and
 * dropped. The `reviewState` query shows what a reviewer needs: ids and reasons, never text.
 */
export function reviewInbox() {
  let status: ReplyStatus = 'deciding';
  let awaiting: { revision: number; draftKey: string; reason: string } | null = null;
  let received: ReviewInput | undefined;
  let standing: ReviewVerdict | null = null;

  /** Why this (well-formed) verdict cannot be accepted now, or null when it can. */
  const refusal = (input: ReviewInput): string | null => {
    if (standing !== null)
      return `a verdict stands: ${standing.verdict} of revision ${standing.revision} by ${standing.reviewer} (ReplyStatus=${status})`;
    if (awaiting === null) return `no verdict is awaited: ReplyStatus=${status}`;
    if (input.revision !== awaiting.revision)
      return `revision ${input.revision} is not the one awaiting a verdict (revision ${awaiting.revision}, ReplyStatus=${status})`;
    return null;
  };
  const accept = (input: ReviewInput) => {
    received = input;
    standing = { verdict: input.verdict, revision: input.revision, reviewer: input.reviewer };
    awaiting = null;
  };
  setHandler(reviewSignal, (input) => {
    const problem = reviewProblem(input) ?? refusal(input);
    if (problem === null) accept(input);
    else log.warn('dropped a review signal', { problem });
  });
  setHandler(
    reviewUpdate,
    (input) => {
      // The validator ran in this same activation; nothing can have changed since. Checked anyway.
      const problem = refusal(input);
      if (problem !== null)
        throw ApplicationFailure.create({ type: FailureType.ReviewRefused, message: problem, nonRetryable: true });
      accept(input);
      return { accepted: true as const, revision: input.revision };
    },
    {
      validator: (input: ReviewInput | undefined) => {
        const problem = reviewProblem(input);
        if (problem !== null)
          throw ApplicationFailure.create({ type: FailureType.InvalidReview, message: problem, nonRetryable: true });
        const refused = refusal(input as ReviewInput);
        if (refused !== null)
          throw ApplicationFailure.create({ type: FailureType.ReviewRefused, message: refused, nonRetryable: true });
      },
    },
  );
  setHandler(reviewStateQuery, (): ReviewState => ({
    status,
    revision: awaiting?.revision ?? null,
    draftKey: awaiting?.draftKey ?? null,
    reason: awaiting?.reason ?? null,
    verdict: standing,
  }));
  return {
    status(next: ReplyStatus) {
      status = next;
    },
    /** The verdict of this message, also when it was recalled from the store (a replay). */
    stands(verdict: ReviewVerdict) {
      standing ??= verdict;
      awaiting = null;
    },
    /** Opens the window for a verdict on this revision of the draft (it exists at AgentMail and in the store). */
    open(shown: { revision: number; draftKey: string; reason: string }) {
      if (standing === null) awaiting = shown;
    },
    /**
     * Waits for a verdict on the open revision. Past `escalateAfterMs` (an approval inbox's
     * timeout) the message is escalated and still waits: it is never sent unapproved.
     */
    async wait(
      waiting: 'awaiting_approval' | 'held' | 'handed_off',
      escalateAfterMs: number | null,
      setStatus: (status: ReplyStatus) => void,
    ): Promise<ReviewInput> {
      if (received === undefined && status !== waiting) setStatus(waiting);
      if (escalateAfterMs !== null && !(await condition(() => received !== undefined, escalateAfterMs))) {
        setStatus('escalated');
        log.warn('reply awaiting approval past its timeout: escalated', { timeoutMs: escalateAfterMs });
      }
      await condition(() => received !== undefined);
      return received as ReviewInput;
    },
  };
}

function reviewProblem(input: ReviewInput | undefined): string | null {
  if (!input || (input.verdict !== 'approve' && input.verdict !== 'reject'))
    return 'verdict must be "approve" or "reject"';
  if (typeof input.revision !== 'number' || !Number.isInteger(input.revision) || input.revision < 1)
    return 'revision must be the draft revision judged (a positive integer, from reviewState)';
  if (typeof input.reviewer !== 'string' || input.reviewer.trim() === '' || input.reviewer.length > 200)
    return 'reviewer must name who judged (1 to 200 characters)';
  if (input.text !== undefined && input.verdict === 'reject') return 'a rejection carries no text';
  if (input.text !== undefined) {
    if (typeof input.text !== 'string') return 'text, when given, must be a string';
    // The rule the activity applies to the stored edit (contract/draft-text.ts): accepted here, accepted there.
    const problem = draftProblem(input.text);
    if (problem !== null) return `text ${problem}`;
  }
  return null;
}

import { condition, log, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import { type MessageRef, type TurnAnswer, type TurnGrant, type TurnHandBack, turnSignal } from '../../contract';
import { boundedCleanup, localSteps } from './proxies';

/** How the wait for the turn ended: the turn (`go`), covered by a sent reply, or a person answers the thread. */
export type TurnOutcome = TurnGrant | { kind: 'person-answering' };

/**
 * This message's turn in its thread: asked by a local activity that changes the thread's row in
 * Postgres (activities/turns/), answered at once when the turn is free, else by the `turn` signal when
 * the holder gives it back. While no answer comes the run asks again on a bounded timer, so a lost
 * signal or a holder gone without a word never leaves it waiting for good.
 */
export function threadTurn() {
  let grant: TurnGrant | undefined;
  let behind = false;
  let held: Omit<TurnHandBack, 'sent'> | null = null;
  const hear = (answer: TurnAnswer) => {
    if (answer.kind === 'behind') behind = true;
    else grant ??= answer; // the first answer counts; a repeat changes nothing
  };
  setHandler(turnSignal, hear);
  return {
    /** `onWait` runs when the run starts to wait visibly: when the ask says so, or past its first re-ask. */
    async take(input: MessageRef & { threadId: string }, onWait: (burstLeftMs: number) => void): Promise<TurnOutcome> {
      const { workflowId, runId } = workflowInfo();
      let asked = await localSteps.askTurn({ ...input, workflowId, runId });
      let shown = false;
      while (asked.kind === 'burst') {
        // The sender may still be writing: wait out the window here, then ask with a fresh read (a
        // repeated ask is never told to wait for the window again).
        shown = true;
        onWait(asked.burstLeftMs);
        await sleep(asked.burstLeftMs);
        asked = await localSteps.askTurn({ ...input, workflowId, runId, again: true });
      }
      if (asked.kind !== 'asked') return asked;
      if (asked.answer !== undefined) hear(asked.answer);
      if (asked.waits && !shown && grant === undefined) {
        shown = true;
        onWait(asked.burstLeftMs);
      }
      let waitMs = asked.reaskMs;
      while (grant === undefined) {
        const woken = await condition(() => grant !== undefined || (behind && !shown), waitMs);
        if (grant !== undefined) break;
        if (!shown) {
          shown = true; // told it waits behind the holder, or past its first re-ask
          onWait(0);
        }
        if (woken) continue;
        log.info('no turn yet: asking again', { waitedMs: waitMs });
        const again = await localSteps.askTurn({ ...input, workflowId, runId, again: true, waitedMs: waitMs });
        // Covered by a reply sent meanwhile, or a person took the thread: no turn is needed any more.
        if (again.kind !== 'asked' && again.kind !== 'burst' && grant === undefined) return again;
        if (again.kind === 'asked') {
          if (again.answer !== undefined) hear(again.answer);
          waitMs = again.reaskMs; // the ask says when: the thread's next moment, or twice this wait
        }
      }
      if (grant.kind === 'go') {
        held = {
          threadKey: asked.threadKey,
          runId,
          messageId: input.messageId,
          sender: asked.sender,
          timestampMs: asked.timestampMs,
        };
      }
      return grant;
    },
    /** What the activity that gives the turn back needs (`sent`: the reply went out); the turn counts as given back from here on. */
    handBack(sent: boolean): TurnHandBack {
      const turn = held ?? {
        threadKey: '',
        runId: '',
        messageId: '',
        sender: '',
        timestampMs: 0,
      };
      held = null;
      return { ...turn, sent };
    },
    /** Gives the turn back without a reply sent (rejected, handed off, failed); `bounded` on the way out of a failure. */
    async release(options: { bounded?: boolean } = {}): Promise<void> {
      if (held === null) return;
      await (options.bounded ? boundedCleanup : localSteps).releaseTurn(this.handBack(false));
    },
  };
}

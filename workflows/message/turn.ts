import { condition, log, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import { type MessageRef, type TurnGrant, type TurnHandBack, turnSignal } from '../../contract';
import { boundedCleanup, localSteps } from './proxies';

/** A waiting run asks again after TURN_REASK_MS, then twice as long each time, up to this. */
const MAX_REASK_MS = 15 * 60 * 1000;

/** How the wait for the turn ended: the turn (`go`), covered by a sent reply, or a person answers the thread. */
export type TurnOutcome = TurnGrant | { kind: 'person-answering' };

/**
 * This message's turn in its thread (workflows/turn-keeper.ts): asked by a local activity that
 * signals the thread's keeper, answered by the `turn` signal. While no answer comes the run asks again
 * on a bounded timer, so a keeper that was terminated or reset rebuilds its queue from the runs.
 */
export function threadTurn() {
  let grant: TurnGrant | undefined;
  let behind = false;
  let held: Omit<TurnHandBack, 'sent'> | null = null;
  setHandler(turnSignal, (answer) => {
    if (answer.kind === 'behind') behind = true;
    else grant ??= answer; // the first answer counts; a repeat changes nothing
  });
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
      if (asked.waits && !shown) {
        shown = true;
        onWait(asked.burstLeftMs);
      }
      let waitMs = asked.reaskMs;
      for (;;) {
        const woken = await condition(() => grant !== undefined || (behind && !shown), waitMs);
        if (grant !== undefined) break;
        if (!shown) {
          shown = true; // told it waits behind the holder, or past its first re-ask
          onWait(0);
        }
        if (woken) continue;
        log.info('no turn yet: asking the keeper again', { waitedMs: waitMs });
        const again = await localSteps.askTurn({ ...input, workflowId, runId, again: true });
        // Covered by a reply sent meanwhile, or a person took the thread: no turn is needed any more.
        if (again.kind !== 'asked' && again.kind !== 'burst' && grant === undefined) return again;
        waitMs = Math.min(2 * waitMs, MAX_REASK_MS);
      }
      if (grant.kind === 'go') {
        held = {
          keeperWorkflowId: asked.keeperWorkflowId,
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
        keeperWorkflowId: '',
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

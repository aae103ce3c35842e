// The paths whose histories test/histories/<build id>/ keeps, one scenario each: `npm run
// histories:record` (scripts/record-histories.ts) runs every one on the test stack and writes its
// history; test/replay-histories.test.ts replays every build's set against the current code.
// A new path of the workflow gets a row here, and the next recording has it.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { DraftAnswer, Drafter, DraftRequest } from '../../activities/draft/drafting/drafter';
import { catchUpInbox } from '../../intake/catch-up';
import { InboxCursors } from '../../intake/inbox-cursors';
import { IntakeStore } from '../../intake/intake-store';
import { FailureType, type InboundMessageResult, type MessageRef } from '../../contract';
import type { FaultSpec } from '../../sandbox/control-client';
import { AppProcess } from '../support/app-process';
import type { Harness, HarnessOptions } from '../support/harness';
import { sendVerdict, waitForStatus } from '../support/review';
import { erase } from '../../privacy/erase';

/**
 * What the recorded mail says and who sends it: marked, so test/histories.test.ts can prove that
 * none of it reached a history (the workflow passes ids and keys only).
 */
export const RECORDED_MAIL = {
  senderPrefix: 'recorded-customer-',
  senderDomain: 'customer.example',
  subject: 'Recorded subject: where is parcel 4411?',
  text: 'Recorded body: my parcel 4411 has not arrived, please help.',
  edit: 'Recorded edit: your parcel 4411 leaves today.',
} as const;

export interface ScenarioContext {
  h: Harness;
  /** Mail into a fresh inbox of `name`, delivered by webhook unless `deliver` is false. */
  mail: (options?: {
    inbox?: string;
    headers?: Record<string, string>;
    deliver?: boolean;
    /** A message of this thread, from this sender (a conversation's follow-up). */
    thread?: string;
    from?: string;
    /** The message's date at AgentMail (ISO 8601): an earlier one for mail that reaches us late. */
    timestamp?: string;
  }) => Promise<MessageRef & { eventId: string }>;
}

export interface Scenario {
  /** The history's file name (without .json). */
  name: string;
  /** The harness this scenario needs; scenarios with equal options share one. */
  harness?: HarnessOptions;
  /** Drives the path to its end and returns the message whose run is recorded, and how it ended. */
  run(ctx: ScenarioContext): Promise<{
    ref: MessageRef;
    ended: InboundMessageResult['status'] | 'failed';
  }>;
}

/** An inbox the harness is told to need approval for, before it starts. */
export const APPROVAL_INBOX = `approval-${randomUUID().slice(0, 8)}@sandbox.agentmail.local`;
const approval: HarnessOptions = { approvalInboxes: [APPROVAL_INBOX], approvalTimeoutMs: 60_000 };

/** Refuses every draft: a run that fails after its decision, with its ticket open. */
class RefusingDrafter implements Drafter {
  readonly name = 'refusing-offline';
  async draft(_request: DraftRequest): Promise<DraftAnswer> {
    throw ApplicationFailure.create({ type: FailureType.DraftRefused, message: 'refused', nonRetryable: true });
  }
}

/** The agent does not know: every draft hands off to a person. */
class HandingOffDrafter implements Drafter {
  readonly name = 'handing-off-offline';
  async draft(_request: DraftRequest): Promise<DraftAnswer> {
    return {
      reply: 'A colleague will answer you shortly.',
      citations: [],
      handoff: { reason: 'no article covers it' },
    };
  }
}

/** A drafted reply with a link to another domain: held for a person (activities/draft/draft-check.ts). */
class LinkingDrafter implements Drafter {
  readonly name = 'linking-offline';
  async draft(_request: DraftRequest): Promise<DraftAnswer> {
    return { reply: 'You can follow it at https://tracking.elsewhere.example/4411.', citations: [], handoff: null };
  }
}

const ended = async (h: Harness, ref: MessageRef) => {
  try {
    return { ref, ended: (await h.resultOf(ref, 90_000)).status };
  } catch {
    return { ref, ended: 'failed' as const };
  }
};

/** A new thread and its customer: the follow-ups of a conversation come from the same sender. */
const newConversation = () => ({
  thread: randomUUID(),
  from: `Recorded Customer <${RECORDED_MAIL.senderPrefix}${randomUUID().slice(0, 8)}@${RECORDED_MAIL.senderDomain}>`,
});

/** Sandbox faults for one scenario, cleared after it. */
async function withFaults<T>(h: Harness, faults: FaultSpec[], run: () => Promise<T>): Promise<T> {
  await h.sandbox.setFaults(faults);
  try {
    return await run();
  } finally {
    await h.sandbox.clearFaults();
  }
}

const approvalPath =
  (verdict: 'approve' | 'reject', options: { text?: string; escalate?: boolean } = {}) =>
  async ({ h, mail }: ScenarioContext) => {
    const ref = await mail({ inbox: APPROVAL_INBOX });
    const handle = await waitForStatus(h, ref, options.escalate ? 'escalated' : 'awaiting_approval', 60_000);
    await sendVerdict(handle, verdict, options.text === undefined ? {} : { text: options.text });
    return ended(h, ref);
  };

export const SCENARIOS: Scenario[] = [
  { name: 'answered', run: async ({ h, mail }) => ended(h, await mail()) },
  // Skipped, one per way the run ends: with a ticket for a person, and without one.
  {
    name: 'skipped-auto-submitted-with-ticket',
    run: async ({ h, mail }) => ended(h, await mail({ headers: { 'Auto-Submitted': 'auto-replied' } })),
  },
  {
    name: 'skipped-mailing-list-without-ticket',
    harness: { ticketForSkipped: false },
    run: async ({ h, mail }) =>
      ended(h, await mail({ headers: { 'List-Id': '<news.lists.example>', 'List-Unsubscribe': '<mailto:u@x>' } })),
  },
  {
    name: 'skipped-budget-exhausted',
    harness: { replyBudgetPerSender: 0 },
    run: async ({ h, mail }) => ended(h, await mail()),
  },
  { name: 'approved', harness: approval, run: approvalPath('approve') },
  { name: 'edited', harness: approval, run: approvalPath('approve', { text: RECORDED_MAIL.edit }) },
  { name: 'rejected', harness: approval, run: approvalPath('reject') },
  {
    name: 'escalated-then-approved',
    harness: { approvalInboxes: [APPROVAL_INBOX], approvalTimeoutMs: 1_500 },
    run: approvalPath('approve', { escalate: true }),
  },
  // A person decides what the agent cannot: a held draft, a hand-off to a ticket or to review.
  {
    name: 'held-then-approved',
    harness: { drafter: new LinkingDrafter() },
    run: async ({ h, mail }) => {
      const ref = await mail();
      await sendVerdict(await waitForStatus(h, ref, 'held', 60_000), 'approve');
      return ended(h, ref);
    },
  },
  {
    name: 'handed-off-to-ticket',
    harness: { drafter: new HandingOffDrafter(), handoff: 'ticket' },
    run: async ({ h, mail }) => ended(h, await mail()),
  },
  {
    // HANDOFF_ACKNOWLEDGMENT on: the customer gets one word back that a person will answer.
    name: 'handed-off-acknowledged',
    harness: {
      drafter: new HandingOffDrafter(),
      handoff: 'ticket',
      activityConfig: { HANDOFF_ACKNOWLEDGMENT: { '*': ['handoff'] } },
    },
    run: async ({ h, mail }) => ended(h, await mail()),
  },
  {
    // The customer is forgotten while the reply awaits a verdict: the approval's first effect answers Erased.
    name: 'erased-awaiting-approval',
    harness: approval,
    run: async ({ h, mail }) => {
      const ref = await mail({ inbox: APPROVAL_INBOX });
      const handle = await waitForStatus(h, ref, 'awaiting_approval', 60_000);
      const message = await h.agentmail.inboxes.messages.get(ref.inboxId, ref.messageId);
      await erase(
        { db: h.db, agentmail: h.agentmail, temporal: undefined, ticketProvider: 'postgres' },
        { address: message.from, inboxes: [APPROVAL_INBOX], requestedBy: 'histories-recorder' },
      );
      await sendVerdict(handle, 'approve');
      return ended(h, ref);
    },
  },
  {
    name: 'handed-off-then-approved',
    harness: { drafter: new HandingOffDrafter(), handoff: 'review' },
    run: async ({ h, mail }) => {
      const ref = await mail();
      await sendVerdict(await waitForStatus(h, ref, 'handed_off', 60_000), 'approve');
      return ended(h, ref);
    },
  },
  {
    // Two messages of one thread within the coalescing window: the first is answered by the second's reply.
    name: 'answered-together',
    harness: { coalesceMs: 3_000 },
    run: async ({ h, mail }) => {
      const { thread, from } = newConversation();
      const first = await mail({ thread, from });
      await mail({ inbox: first.inboxId, thread, from });
      return ended(h, first);
    },
  },
  {
    // A thread's turns: a message answered alone, then a burst of two answered together; the
    // burst's newest message is recorded (its turn asked and granted, given back after the send).
    name: 'thread-turns',
    harness: { coalesceMs: 3_000 },
    run: async ({ h, mail }) => {
      const { thread, from } = newConversation();
      const first = await mail({ thread, from });
      await ended(h, first);
      await mail({ inbox: first.inboxId, thread, from });
      const last = await mail({ inbox: first.inboxId, thread, from });
      return ended(h, last);
    },
  },
  {
    // A burst that reaches its turns after its window (the workers behind): the oldest waits for the
    // sender's newer messages AgentMail already has, and the newest answers all three (recorded).
    name: 'thread-turns-late-burst',
    harness: { coalesceMs: 3_000 },
    run: async ({ h, mail }) => {
      const { thread, from } = newConversation();
      const inbox = h.newInbox();
      const minuteAgo = Date.now() - 60_000;
      const burst = [];
      for (let i = 0; i < 3; i++)
        burst.push(
          await mail({
            inbox,
            thread,
            from,
            deliver: false,
            timestamp: new Date(minuteAgo + i * 1_000).toISOString(),
          }),
        );
      await h.sandbox.redeliver(burst[0]!.eventId);
      await waitForStatus(h, burst[0]!, 'waiting_turn');
      await Promise.all(burst.slice(1).map((m) => h.sandbox.redeliver(m.eventId)));
      return ended(h, burst[2]!);
    },
  },
  {
    // A follow-up written while the thread's first reply awaits approval waits behind it (asking
    // again now and then, each ask looking at the holder), and takes its turn once the first is sent.
    name: 'thread-turns-behind-approval',
    harness: approval,
    run: async ({ h, mail }) => {
      const { thread, from } = newConversation();
      const first = await mail({ inbox: APPROVAL_INBOX, thread, from });
      const firstHandle = await waitForStatus(h, first, 'awaiting_approval', 60_000);
      const second = await mail({ inbox: APPROVAL_INBOX, thread, from });
      await waitForStatus(h, second, 'waiting_turn', 60_000);
      await sendVerdict(firstHandle, 'approve');
      await sendVerdict(await waitForStatus(h, second, 'awaiting_approval', 60_000), 'approve');
      return ended(h, second);
    },
  },
  {
    // A teammate answered in the thread (a message of ours the agent did not send): the customer's
    // next message gets no automatic reply (SkipReason=person-answering) and a note for the team.
    name: 'skipped-person-answering',
    run: async ({ h, mail }) => {
      const { thread, from } = newConversation();
      const first = await mail({ thread, from });
      await ended(h, first);
      await h.agentmail.inboxes.messages.reply(first.inboxId, first.messageId, { text: 'A colleague answers.' });
      return ended(h, await mail({ inbox: first.inboxId, thread, from }));
    },
  },
  // Failed, one per step whose final failure ends the run.
  {
    name: 'failed-message-not-found',
    run: async ({ h, mail }) =>
      withFaults(h, [{ match: { method: 'GET', path: '/messages/' }, action: 'status', status: 404 }], async () =>
        ended(h, await mail()),
      ),
  },
  {
    name: 'failed-draft-refused',
    harness: { drafter: new RefusingDrafter() },
    run: async ({ h, mail }) => ended(h, await mail()),
  },
  {
    name: 'failed-reply-rejected',
    run: async ({ h, mail }) =>
      withFaults(h, [{ match: { method: 'POST', path: '/reply' }, action: 'status', status: 400 }], async () =>
        ended(h, await mail()),
      ),
  },
  {
    name: 'failed-approved-send-rejected',
    harness: approval,
    run: async (ctx) =>
      withFaults(ctx.h, [{ match: { method: 'POST', path: '/reply' }, action: 'status', status: 422 }], () =>
        approvalPath('approve')(ctx),
      ),
  },
  {
    name: 'retried-after-a-transient-failure',
    run: async ({ h, mail }) =>
      withFaults(
        h,
        [{ match: { method: 'POST', path: '/reply', count: 2 }, action: 'status', status: 503 }],
        async () => ended(h, await mail()),
      ),
  },
  {
    // A worker process SIGKILLed after AgentMail accepted the send: the next worker's attempt replays it.
    name: 'retried-after-a-crash',
    harness: { worker: false },
    run: async ({ h, mail }) => {
      const crashing = await AppProcess.startWorker(h, { failpoints: ['reply.after-effect'] });
      const ref = await mail();
      await crashing.exited;
      const fresh = await AppProcess.startWorker(h);
      try {
        return await ended(h, ref);
      } finally {
        await fresh.stop();
      }
    },
  },
  {
    // Started by the catch-up (`npm run replay`) for mail whose webhook never came.
    name: 'caught-up',
    run: async ({ h, mail }) => {
      const ref = await mail({ deliver: false });
      await catchUpInbox(
        {
          agentmail: h.agentmail,
          intake: new IntakeStore(h.db, h.taskQueue),
          cursors: new InboxCursors(h.db),
          operationRetentionDays: 90,
        },
        { inboxId: ref.inboxId, since: new Date(Date.now() - 60_000) },
      );
      return ended(h, ref);
    },
  },
];

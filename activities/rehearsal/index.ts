import { Context } from '@temporalio/activity';
import type { AgentMailClient } from 'agentmail';
import type { RehearsedMessage } from '../../contract/rehearsal';
import { createEmbedder } from '../../knowledge';
import type { ActivityConfig } from '../../lib/config';
import type { Db } from '../../lib/db';
import { OwnAddresses } from '../decide/own-addresses';
import type { Drafter } from '../draft/drafting/drafter';
import { withFailureBoundary } from '../failures/boundary';
import { listPeriod, readOnly } from './reads';
import { rehearseMessage } from './rehearse-message';
import {
  completeResult,
  finishRehearsal,
  messageAt,
  messageCount,
  pruneExpiredRehearsals,
  requireRehearsal,
  storeListing,
  storedOutcome,
} from './store';

export interface RehearsalDeps {
  db: Db;
  /** Handed on read-only (reads.ts): the rehearsal's activities never see the client itself. */
  agentmail: AgentMailClient;
  drafter: Drafter;
  config: ActivityConfig;
}

/**
 * The rehearsal's activities (workflows/rehearsal.ts runs them on the rehearsal's own task queue,
 * in the process of `npm run rehearse`). Built from reads, the drafter and Postgres alone: the
 * send, the labels, AgentMail drafts, tickets, notifications and the budget are not among their
 * dependencies, so none of them can happen (docs/rehearsal.md).
 */
export function createRehearsalActivities(deps: RehearsalDeps) {
  const reader = readOnly(deps.agentmail);
  const own = new OwnAddresses(reader, deps.config.REPLYONCE_OWN_ADDRESSES);
  const embedder = createEmbedder(deps.config);
  const rehearse = { db: deps.db, reader, drafter: deps.drafter, own, embedder, config: deps.config };
  return withFailureBoundary({
    /** Lists the period once and stores the messages chosen; a repeat finds them stored. */
    async listRehearsal(input: { rehearsalId: string }): Promise<{ total: number }> {
      const rehearsal = await requireRehearsal(deps.db, input.rehearsalId);
      if (rehearsal.listedAt !== null) return { total: await messageCount(deps.db, input.rehearsalId) };
      const listing = await listPeriod(reader, {
        rehearsalId: rehearsal.rehearsalId,
        inboxId: rehearsal.inboxId,
        from: rehearsal.from,
        to: rehearsal.to,
        limit: rehearsal.limit,
        sample: rehearsal.sampled,
      });
      return { total: await storeListing(deps.db, input.rehearsalId, listing) };
    },
    rehearseMessage: (input: { rehearsalId: string; position: number }) => rehearseMessage(rehearse, input),
    /** A message AgentMail would not give us, after the wait: recorded as unreadable, the rest go on. */
    async recordUnreadable(input: {
      rehearsalId: string;
      position: number;
      failure: string;
    }): Promise<RehearsedMessage> {
      const rehearsal = await requireRehearsal(deps.db, input.rehearsalId);
      const { messageId, threadId } = await messageAt(deps.db, input.rehearsalId, input.position);
      await completeResult(
        deps.db,
        { rehearsalId: input.rehearsalId, inboxId: rehearsal.inboxId, messageId, ownerToken: null },
        {
          outcome: 'unreadable',
          reason: input.failure.slice(0, 200),
          result: {
            threadId,
            subject: '',
            text: '',
            receivedAt: '',
            draft: null,
            covers: [messageId],
            coveredBy: null,
            failure: input.failure.slice(0, 200),
            team: null,
            usage: null,
            elapsedMs: 0,
            modelMs: null,
          },
        },
      );
      // A result stored meanwhile (the message's own attempt won after all) stands.
      return (
        (await storedOutcome(deps.db, input.rehearsalId, messageId)) ?? {
          outcome: 'unreadable',
          reason: input.failure,
          replayed: false,
        }
      );
    },
    async finishRehearsal(input: { rehearsalId: string }): Promise<void> {
      await finishRehearsal(deps.db, input.rehearsalId);
    },
    async pruneRehearsals(): Promise<{ deleted: number }> {
      Context.current().heartbeat();
      return { deleted: await pruneExpiredRehearsals(deps.db) };
    },
  });
}

export type RehearsalActivities = ReturnType<typeof createRehearsalActivities>;

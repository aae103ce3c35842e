import { defineQuery } from '@temporalio/workflow';
import { keyPart, type MessageRef } from './keys';

/**
 * The rehearsal (docs/rehearsal.md): an inbox's past mail run through the decision, the turn rules,
 * retrieval, the drafter and the draft rules with every outward effect left out by construction.
 * This is what the workflow, the activities, the CLI and the desk share: ids, outcomes, the query.
 * Ids, counts and outcome names only: texts live in Postgres (rehearsal_results), never in history.
 */

export const REHEARSAL_WORKFLOW = 'rehearsalWorkflow';

/** A rehearsal id: what a person types (`--id`) and what namespaces every key of the rehearsal. */
export const REHEARSAL_ID = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** One rehearsal is one workflow: started twice with the same id, the second start attaches to the first. */
export const rehearsalWorkflowId = (rehearsalId: string) => `rehearsal-${rehearsalId}`;

/**
 * The task queue of one rehearsal: the process that started it (`npm run rehearse`) is its worker,
 * with its own configuration, so a candidate configuration is rehearsed by starting that process
 * with it, and two rehearsals never take each other's tasks.
 */
export const rehearsalTaskQueue = (rehearsalId: string) => `rehearsal-${rehearsalId}`;

/**
 * The key of one message's rehearsal: `rehearsal/<id>/<inbox>/<message>/<kind>/v1`. Live keys start
 * with an inbox address (contract/keys.ts), so none can take this shape; and rehearsal results are
 * stored in their own table besides.
 */
export const rehearsalKey = (rehearsalId: string, ref: MessageRef, kind: 'outcome' = 'outcome') =>
  `rehearsal/${rehearsalId}/${keyPart(ref.inboxId)}/${keyPart(ref.messageId)}/${kind}/v1`;

/** What the agent would have done with one message. */
export type RehearsalOutcomeKind =
  /** A reply would go out (after a reviewer's approval in an approval inbox: `approval`). */
  | 'answered'
  /** A person answers (its reason: model, no-citation, bad-citation, language, topic, attachment, learned). */
  | 'handed-off'
  /** No reply owed: the decision's skip reason (robots, lists, our own mail, too old, …). */
  | 'skipped'
  /** A draft that tripped a draft rule (link, address, instructions): a person approves it first. */
  | 'held'
  /** A later message of the same sender's burst answers this one too (REPLY_COALESCE_MS). */
  | 'covered'
  /** The model timed out, refused or answered outside the schema: no draft. */
  | 'model-failed'
  /** AgentMail could not give us the message or its thread (after waiting): not rehearsed. */
  | 'unreadable';

export const REHEARSAL_OUTCOMES: readonly RehearsalOutcomeKind[] = [
  'answered',
  'handed-off',
  'held',
  'skipped',
  'covered',
  'model-failed',
  'unreadable',
];

/** What one message's activity returns to the workflow: the outcome and its reason's name, no text. */
export interface RehearsedMessage {
  outcome: RehearsalOutcomeKind;
  /** The skip reason, hand-off kind, hold rules (joined by `+`), failure type; null for `answered`. */
  reason: string | null;
  /** Whether this run drafted it (false: stored by an earlier attempt, replayed). */
  replayed: boolean;
}

export interface RehearsalInput {
  rehearsalId: string;
  /** How many messages of the period were chosen (the listing activity's answer, carried over continue-as-new). */
  total?: number;
  /** Where to go on from (continue-as-new). */
  next?: number;
  /** Outcome counts so far (continue-as-new). */
  counts?: Partial<Record<RehearsalOutcomeKind, number>>;
  /** Messages rehearsed at once (default 4). */
  concurrency?: number;
  /** How long one message waits for AgentMail before it counts as unreadable (ms; default 30 minutes). */
  readWaitMs?: number;
}

export interface RehearsalProgress {
  rehearsalId: string;
  phase: 'listing' | 'rehearsing' | 'done';
  total: number;
  done: number;
  counts: Partial<Record<RehearsalOutcomeKind, number>>;
}

/** The CLI's progress bar and the desk read this. */
export const rehearsalProgressQuery = defineQuery<RehearsalProgress>('rehearsalProgress');

/** Failure types of the rehearsal, searchable in the Web UI. */
export const RehearsalFailureType = {
  /** The worker's configuration is not the one the rehearsal was started with: resume with the same settings. */
  ConfigurationChanged: 'RehearsalConfigurationChanged',
  /** No rehearsal row for the id (deleted, or never created). */
  Unknown: 'RehearsalUnknown',
} as const;

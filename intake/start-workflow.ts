import { randomUUID } from 'node:crypto';
import { type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { encodeUnifiedSearchAttributes } from '@temporalio/common/lib/converter/payload-search-attributes';
import { temporal } from '@temporalio/proto';
import { traceWorkflowStart } from '../lib/tracing';
import { INBOUND_MESSAGE_WORKFLOW, type InboundMessageInput, type ReplyStatus, SearchAttributes } from '../contract';
import type { IntakeJob } from './intake-store';

export interface StartOutcome {
  workflowId: string;
  /** False when a workflow for this message already existed (running: attached; closed: not redone). */
  started: boolean;
  /**
   * The message's last run was terminated or cancelled: a person stopped it, and that stands.
   * Nothing was started; only an explicit per-message rerun (`npm run replay -- --rerun`) starts one.
   */
  stopped?: boolean;
}

const { WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowExecutionStatus } = temporal.api.enums.v1;

/** Closed runs a person ended: they count as handled, never as failed. */
const STOPPED = new Set<temporal.api.enums.v1.WorkflowExecutionStatus>([
  WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED,
  WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED,
]);
/** Closed runs that did not finish their work: a new run resumes them under the same keys. */
const UNFINISHED = new Set<temporal.api.enums.v1.WorkflowExecutionStatus>([
  WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_FAILED,
  WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
]);

/**
 * Starts the message's workflow, or finds the one that exists. Called by the intake only
 * (intake/starter.ts right after the commit, intake/relay.ts for what that left): whether the
 * message is new was decided by the intake row, so `started` is only logged. The raw
 * StartWorkflowExecution is used instead of `client.workflow.start` because only its response
 * says whether a new run was created.
 *
 * - USE_EXISTING: a running workflow for the message is attached to, not failed on.
 * - REJECT_DUPLICATE: a closed one is never replaced by this call. A new message costs ONE call;
 *   only when a closed run exists (a catch-up after the intake row was pruned, a relay retry) is
 *   its status read: completed → not redone; terminated or cancelled → a person stopped it, not
 *   redone (`stopped`); failed or timed out → started again (ALLOW_DUPLICATE_FAILED_ONLY), and
 *   the operation keys keep its effects single. Temporal's own ALLOW_DUPLICATE_FAILED_ONLY
 *   alone would count a terminated run as failed and answer the message an operator stopped.
 */
export async function startInboundWorkflow(
  client: Client,
  options: { taskQueue: string; deadline: Date },
  input: IntakeJob,
): Promise<StartOutcome> {
  // Computed once, when the intake row was written (its primary key): the job carries it.
  const { workflowId } = input;
  const first = await startOnce(
    client,
    options,
    input,
    WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
  );
  if (!first.exists) return { workflowId, started: first.started };
  const status = await lastRunStatus(client, options.deadline, workflowId);
  if (status !== undefined && STOPPED.has(status)) return { workflowId, started: false, stopped: true };
  if (status === undefined || !UNFINISHED.has(status)) return { workflowId, started: false };
  const again = await startOnce(
    client,
    options,
    input,
    WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
  );
  return { workflowId, started: again.started };
}

/** The status of the message's latest run (undefined: none, e.g. deleted past retention meanwhile). */
async function lastRunStatus(
  client: Client,
  deadline: Date,
  workflowId: string,
): Promise<temporal.api.enums.v1.WorkflowExecutionStatus | undefined> {
  try {
    const described = await client.withDeadline(deadline, () =>
      client.workflowService.describeWorkflowExecution({
        namespace: client.options.namespace,
        execution: { workflowId },
      }),
    );
    return described.workflowExecutionInfo?.status ?? undefined;
  } catch (error) {
    if (grpcCode(error) === 5) return undefined; // NOT_FOUND
    throw error;
  }
}

/** started: a new run; not started: attached to the running one, or (`exists`) a closed run blocks this policy. */
async function startOnce(
  client: Client,
  options: { taskQueue: string; deadline: Date },
  input: IntakeJob,
  reusePolicy: temporal.api.enums.v1.WorkflowIdReusePolicy,
): Promise<{ started: boolean; exists?: true }> {
  const { workflowId } = input;
  const args: InboundMessageInput = {
    inboxId: input.inboxId,
    messageId: input.messageId,
    ...(input.eventId ? { eventId: input.eventId } : {}),
  };
  const searchAttributes = [
    { key: SearchAttributes.InboxId, value: input.inboxId },
    { key: SearchAttributes.MessageId, value: input.messageId },
    ...(input.threadId ? [{ key: SearchAttributes.ThreadId, value: input.threadId }] : []),
    // Set here, with the start's own visibility record, so the run need not upsert it.
    { key: SearchAttributes.ReplyStatus, value: 'deciding' satisfies ReplyStatus },
  ];
  // Traced (when on) as the client interceptor traces client.workflow.start, with the header it would inject.
  return traceWorkflowStart({ workflowId, workflowType: INBOUND_MESSAGE_WORKFLOW }, async (header) => {
    try {
      const response = await client.withDeadline(options.deadline, () =>
        client.workflowService.startWorkflowExecution({
          namespace: client.options.namespace,
          identity: client.options.identity,
          requestId: randomUUID(),
          workflowId,
          workflowType: { name: INBOUND_MESSAGE_WORKFLOW },
          taskQueue: { name: options.taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
          input: { payloads: [defaultPayloadConverter.toPayload(args)] },
          workflowIdConflictPolicy: WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
          workflowIdReusePolicy: reusePolicy,
          searchAttributes: { indexedFields: encodeUnifiedSearchAttributes(undefined, searchAttributes) },
          header,
        }),
      );
      return { started: response.started ?? true };
    } catch (error) {
      // gRPC ALREADY_EXISTS: a closed run of the message is in the way of this reuse policy.
      if (grpcCode(error) === 6) return { started: false, exists: true };
      throw error;
    }
  });
}

function grpcCode(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}

/**
 * The catch-up's question, for a page of messages at once: which of these workflows' latest run
 * a person stopped (terminated or cancelled). One visibility query per call (ids are hex, safe
 * to quote); visibility lags a second or so, and the start checks again (startInboundWorkflow).
 */
export async function stoppedRuns(client: Client, workflowIds: string[], deadline: Date): Promise<Set<string>> {
  if (workflowIds.length === 0) return new Set();
  const latest = new Map<string, { at: number; stopped: boolean }>();
  const query = `WorkflowId IN (${workflowIds.map((id) => `'${id.replace(/'/g, '')}'`).join(', ')})`;
  await client.withDeadline(deadline, async () => {
    for await (const run of client.workflow.list({ query })) {
      const at = run.startTime.getTime();
      const seen = latest.get(run.workflowId);
      if (seen && seen.at >= at) continue;
      latest.set(run.workflowId, { at, stopped: run.status.name === 'TERMINATED' || run.status.name === 'CANCELLED' });
    }
  });
  return new Set([...latest].filter(([, run]) => run.stopped).map(([id]) => id));
}

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
}

const { WorkflowIdConflictPolicy, WorkflowIdReusePolicy } = temporal.api.enums.v1;

/**
 * Starts the message's workflow, or finds the one that exists, in ONE call to Temporal. Called by
 * the intake only (intake/starter.ts right after the commit, intake/relay.ts for what that left):
 * whether the message is new was decided by the intake row, so `started` is only logged.
 * The raw StartWorkflowExecution is used instead of `client.workflow.start` because only its
 * response says whether a new run was created.
 *
 * - USE_EXISTING: a running workflow for the message is attached to, not failed on.
 * - ALLOW_DUPLICATE_FAILED_ONLY: a completed one is not redone (ALREADY_EXISTS → not started);
 *   a failed one may be started again, and the operation keys keep its effects single.
 */
export async function startInboundWorkflow(
  client: Client,
  options: { taskQueue: string; deadline: Date },
  input: IntakeJob,
): Promise<StartOutcome> {
  // Computed once, when the intake row was written (its primary key): the job carries it.
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
          workflowIdReusePolicy: WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
          searchAttributes: { indexedFields: encodeUnifiedSearchAttributes(undefined, searchAttributes) },
          header,
        }),
      );
      return { workflowId, started: response.started ?? true };
    } catch (error) {
      if (isAlreadyExists(error)) return { workflowId, started: false };
      throw error;
    }
  });
}

/** gRPC ALREADY_EXISTS: the message's workflow completed earlier and is not redone. */
function isAlreadyExists(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 6;
}

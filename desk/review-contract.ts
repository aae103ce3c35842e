// BRIDGE until branch gate's review contract (contract/workflow.ts) is merged: the shapes of the lead's Decisions.
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { ReplyStatus as BaseStatus } from '../contract';

export type ReplyStatus = BaseStatus | 'held' | 'handed_off' | 'answered-together';
export interface ReviewState {
  status: ReplyStatus;
  revision: number | null;
  draftKey: string | null;
  reason: string | null;
  verdict: null | { verdict: 'approve' | 'reject'; revision: number; reviewer: string };
}
export interface ReviewInput {
  verdict: 'approve' | 'reject';
  revision: number;
  text?: string;
  reviewer: string;
}
export const reviewStateQuery = defineQuery<ReviewState>('reviewState');
export const reviewUpdate = defineUpdate<{ accepted: true; revision: number }, [ReviewInput]>('review');
export const REVIEW_REFUSED = 'ReviewRefused';

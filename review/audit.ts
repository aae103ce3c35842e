import type { Db } from '../lib/db';

/**
 * Who approved this email, which revision, when: one row per accepted verdict, written by the
 * activity that records the verdict (activities/draft/approval.ts), read by the admin route and
 * `npm run reviewer -- audit`. Ids only: no text, no customer address.
 */

export interface ReviewAuditEntry {
  workflowId: string;
  inboxId: string;
  messageId: string;
  verdict: 'approve' | 'reject';
  revision: number;
  /** Whether the reviewer replaced the drafted text. */
  edited: boolean;
  reviewerId: string;
  at: Date;
}

/** Writes the verdict's row; a retried activity finds its row and leaves it (one verdict per message). */
export async function recordReviewAudit(db: Db, entry: Omit<ReviewAuditEntry, 'at'>): Promise<void> {
  await db.query(
    `INSERT INTO review_audit (workflow_id, inbox_id, message_id, verdict, revision, edited, reviewer_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (workflow_id) DO NOTHING`,
    [entry.workflowId, entry.inboxId, entry.messageId, entry.verdict, entry.revision, entry.edited, entry.reviewerId],
  );
}

interface AuditRow {
  workflow_id: string;
  inbox_id: string;
  message_id: string;
  verdict: 'approve' | 'reject';
  revision: number;
  edited: boolean;
  reviewer_id: string;
  at: Date;
}

/** The audit, newest first: of one message's workflow, or the latest `limit` rows. */
export async function listReviewAudit(
  db: Db,
  filter: { workflowId?: string; limit?: number } = {},
): Promise<ReviewAuditEntry[]> {
  const { rows } = await db.query<AuditRow>(
    `SELECT workflow_id, inbox_id, message_id, verdict, revision, edited, reviewer_id, at FROM review_audit
     WHERE $1::text IS NULL OR workflow_id = $1 ORDER BY at DESC, workflow_id LIMIT $2`,
    [filter.workflowId ?? null, filter.limit ?? 100],
  );
  return rows.map((row) => ({
    workflowId: row.workflow_id,
    inboxId: row.inbox_id,
    messageId: row.message_id,
    verdict: row.verdict,
    revision: row.revision,
    edited: row.edited,
    reviewerId: row.reviewer_id,
    at: row.at,
  }));
}

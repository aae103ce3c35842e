import { setCurrentDetails, setHandler } from '@temporalio/workflow';
import {
  type OperationKind,
  type OperationReport,
  operationsQuery,
  type OperationView,
  type ReplyStatus,
} from '../../contract';

/**
 * The `operations` query. Each line is what the activity that ran the operation reported
 * (executed, or replayed from the store), or `pending` while its report is not in; the
 * workflow adds only what no activity can say: that an operation failed, or will not run.
 */
export function operationsBoard() {
  const views = new Map<string, OperationView>();
  let replyStatus: ReplyStatus = 'deciding';
  setHandler(operationsQuery, () => [...views.values()]);
  // The same picture on the workflow's page in the Web UI ("current details"), so a person sees
  // where a message stands without running the query: ids, kinds and states only, never content.
  const show = () => setCurrentDetails(currentDetails(replyStatus, [...views.values()]));
  const set = (view: OperationView) => {
    views.set(view.key, view);
    show();
  };
  return {
    status(status: ReplyStatus) {
      replyStatus = status;
      show();
    },
    /** Shows `key` as pending until `activity` reports its operation, then shows that report. */
    async run<R extends { operation: OperationReport }>(
      key: string,
      kind: OperationKind,
      activity: Promise<R>,
      summary: (result: R) => string,
    ): Promise<R> {
      set({ key, kind, status: 'pending' });
      const result = await activity;
      const { operation } = result;
      set({
        key: operation.key,
        kind: operation.kind,
        status: operation.state,
        summary: summary(result),
      });
      return result;
    },
    skip(key: string, kind: OperationKind, summary: string) {
      set({ key, kind, status: 'skipped', summary });
    },
    failPending(summary: string) {
      for (const view of views.values())
        if (view.status === 'pending') views.set(view.key, { ...view, status: 'failed', summary });
      show();
    },
  };
}

/** Markdown for the Web UI: the reply status, then one row per operation (`kind/vN`, its state). */
export function currentDetails(status: ReplyStatus, views: OperationView[]): string {
  const cell = (text: string) => text.replace(/[|\r\n]/g, ' ');
  const rows = views.map((view) => {
    const version = /\/(v\d+)$/.exec(view.key)?.[1] ?? '';
    return `| ${view.kind}/${version} | ${view.status} | ${cell(view.summary ?? '')} |`;
  });
  return [`**ReplyStatus**: ${status}`, '', '| operation | state | |', '|---|---|---|', ...rows].join('\n');
}

import type { RehearsalOutcomeKind } from '../../contract/rehearsal';
import type { RehearsedRow } from './report';

/**
 * Two rehearsals of the same messages under two configurations, side by side (docs/rehearsal.md):
 * exactly the messages whose outcome changed — a decision that flipped, a draft that changed,
 * citations gained or lost, a new hold or hand-off — and nothing else. The check before
 * `npm run deploy -- promote` and before changing DRAFT_* or the articles.
 */

export interface OutcomeChange {
  messageId: string;
  subject: string;
  before: { outcome: RehearsalOutcomeKind; reason: string | null; citations: string[] } | null;
  after: { outcome: RehearsalOutcomeKind; reason: string | null; citations: string[] } | null;
  changes: string[];
}

export interface Comparison {
  a: string;
  b: string;
  /** Messages rehearsed by both. */
  compared: number;
  changed: OutcomeChange[];
}

const view = (row: RehearsedRow) => ({
  outcome: row.outcome,
  reason: row.reason,
  citations: row.result.draft?.citations ?? [],
});

export function compareRehearsals(
  a: string,
  rowsA: readonly RehearsedRow[],
  b: string,
  rowsB: readonly RehearsedRow[],
): Comparison {
  const before = new Map(rowsA.map((row) => [row.messageId, row]));
  const after = new Map(rowsB.map((row) => [row.messageId, row]));
  const changed: OutcomeChange[] = [];
  let compared = 0;
  const ids = [...new Set([...before.keys(), ...after.keys()])];
  for (const id of ids) {
    const x = before.get(id);
    const y = after.get(id);
    const subject = (y ?? x)?.result.subject || '(no subject)';
    if (x === undefined || y === undefined) {
      changed.push({
        messageId: id,
        subject,
        before: x ? view(x) : null,
        after: y ? view(y) : null,
        changes: [x === undefined ? `only in ${b}` : `only in ${a}`],
      });
      continue;
    }
    compared += 1;
    const changes: string[] = [];
    if (x.outcome !== y.outcome || x.reason !== y.reason) {
      changes.push(`decision flipped: ${label(x)} → ${label(y)}`);
      if (y.outcome === 'held' && x.outcome !== 'held') changes.push('new held');
      if (y.outcome === 'handed-off' && x.outcome !== 'handed-off') changes.push('new hand-off');
    }
    const textX = x.result.draft?.text ?? null;
    const textY = y.result.draft?.text ?? null;
    if (textX !== null && textY !== null && textX !== textY) changes.push('draft changed');
    const citesX = new Set(x.result.draft?.citations ?? []);
    const citesY = new Set(y.result.draft?.citations ?? []);
    const gained = [...citesY].filter((c) => !citesX.has(c));
    const lost = [...citesX].filter((c) => !citesY.has(c));
    if (gained.length > 0) changes.push(`citations gained: ${gained.join(', ')}`);
    if (lost.length > 0) changes.push(`citations lost: ${lost.join(', ')}`);
    if (changes.length > 0) changed.push({ messageId: id, subject, before: view(x), after: view(y), changes });
  }
  return { a, b, compared, changed };
}

const label = (row: Pick<RehearsedRow, 'outcome' | 'reason'>) =>
  row.reason ? `${row.outcome} (${row.reason})` : row.outcome;

export function comparisonMarkdown(comparison: Comparison): string {
  const lines = [
    `# Rehearsal ${comparison.a} → ${comparison.b}`,
    '',
    `${comparison.compared} messages rehearsed by both; ${comparison.changed.length} changed.`,
    '',
  ];
  if (comparison.changed.length === 0) lines.push('Nothing changed.');
  else {
    lines.push('| message | subject | before | after | what changed |', '|---|---|---|---|---|');
    for (const c of comparison.changed)
      lines.push(
        `| \`${c.messageId.replace(/\|/g, ' ')}\` | ${c.subject.replace(/[|\r\n]+/g, ' ').slice(0, 80)} | ${c.before ? label(c.before) : '—'} | ${c.after ? label(c.after) : '—'} | ${c.changes.join('; ').replace(/\|/g, ' ')} |`,
      );
  }
  return `${lines.join('\n')}\n`;
}

import type { RehearsalOutcomeKind } from '../../contract/rehearsal';
import type { Db } from '../../lib/db';
import type { RehearsalResult } from './result';
import { findRehearsal, messageCount, type Rehearsal } from './store';

/**
 * The report a team lead reads in a minute (docs/rehearsal.md): what the agent would have done
 * with the period's mail, beside what the team did. Built from the rehearsal's rows; the CLI prints
 * it as Markdown or JSON and the desk draws the same figures.
 */

export interface RehearsedRow {
  messageId: string;
  position: number;
  outcome: RehearsalOutcomeKind;
  reason: string | null;
  result: RehearsalResult;
}

export interface ReportSettings {
  slowAnswerMs: number;
  inputPricePerMTok?: number | undefined;
  outputPricePerMTok?: number | undefined;
}

export interface RehearsalReport {
  rehearsal: Pick<
    Rehearsal,
    | 'rehearsalId'
    | 'inboxId'
    | 'from'
    | 'to'
    | 'limit'
    | 'sampled'
    | 'truncated'
    | 'listedTotal'
    | 'configuration'
    | 'createdAt'
    | 'finishedAt'
    | 'expiresAt'
  >;
  chosen: number;
  rehearsed: number;
  outcomes: {
    answered: { total: number; afterApproval: number };
    handedOff: { total: number; byReason: Record<string, number> };
    skipped: { total: number; byReason: Record<string, number> };
    held: { total: number; byRule: Record<string, number> };
    covered: number;
    modelFailed: { total: number; byReason: Record<string, number> };
    unreadable: { total: number; messages: string[] };
  };
  /** Answered by the agent where the team took longer than slowAnswerMs, escalated, or never answered. */
  agentWouldAnswer: Array<{
    messageId: string;
    subject: string;
    teamAfterMs: number | null;
    escalated: boolean;
    unanswered: boolean;
  }>;
  /** Handed off by the agent where the team answered in one line. */
  handedOffOneLiners: Array<{ messageId: string; subject: string; teamAnswer: string }>;
  model: {
    calls: number;
    inputTokens: number;
    outputTokens: number;
    tokensEstimated: boolean;
    costUsd: number | null;
    msPerMessage: number;
    modelMsPerCall: number;
  };
  /** Questions no article covered: hand-offs and uncited drafts where retrieval found nothing to cite. */
  contentGaps: Array<{ messageId: string; subject: string; question: string }>;
  /** Outcomes per day of the period (the plot over time). */
  byDay: Array<{ day: string } & Partial<Record<RehearsalOutcomeKind, number>>>;
}

export async function loadRows(db: Db, rehearsalId: string): Promise<RehearsedRow[]> {
  const { rows } = await db.query<RehearsedRow>(
    `SELECT r.message_id AS "messageId", m.position, r.outcome, r.reason, r.result
       FROM rehearsal_results r JOIN rehearsal_messages m USING (rehearsal_id, message_id)
      WHERE r.rehearsal_id = $1 AND r.status = 'complete' ORDER BY m.position`,
    [rehearsalId],
  );
  return rows;
}

export async function rehearsalReport(
  db: Db,
  rehearsalId: string,
  settings: ReportSettings,
): Promise<RehearsalReport | null> {
  const rehearsal = await findRehearsal(db, rehearsalId);
  if (rehearsal === null) return null;
  return buildReport(rehearsal, await messageCount(db, rehearsalId), await loadRows(db, rehearsalId), settings);
}

const bump = (counts: Record<string, number>, key: string) => {
  counts[key] = (counts[key] ?? 0) + 1;
};
/** One more message of an outcome counted by its reason (a reason-less one counts as `unknown`). */
const countByReason = (figure: { total: number; byReason: Record<string, number> }, reason: string | null) => {
  figure.total += 1;
  bump(figure.byReason, reason ?? 'unknown');
};
const firstLine = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .find((l) => l !== '' && !l.startsWith('>')) ?? '';

export function buildReport(
  rehearsal: Rehearsal,
  chosen: number,
  rows: readonly RehearsedRow[],
  settings: ReportSettings,
): RehearsalReport {
  const outcomes: RehearsalReport['outcomes'] = {
    answered: { total: 0, afterApproval: 0 },
    handedOff: { total: 0, byReason: {} },
    skipped: { total: 0, byReason: {} },
    held: { total: 0, byRule: {} },
    covered: 0,
    modelFailed: { total: 0, byReason: {} },
    unreadable: { total: 0, messages: [] },
  };
  const report: RehearsalReport = {
    rehearsal: {
      rehearsalId: rehearsal.rehearsalId,
      inboxId: rehearsal.inboxId,
      from: rehearsal.from,
      to: rehearsal.to,
      limit: rehearsal.limit,
      sampled: rehearsal.sampled,
      truncated: rehearsal.truncated,
      listedTotal: rehearsal.listedTotal,
      configuration: rehearsal.configuration,
      createdAt: rehearsal.createdAt,
      finishedAt: rehearsal.finishedAt,
      expiresAt: rehearsal.expiresAt,
    },
    chosen,
    rehearsed: rows.length,
    outcomes,
    agentWouldAnswer: [],
    handedOffOneLiners: [],
    model: {
      calls: 0,
      inputTokens: 0,
      outputTokens: 0,
      tokensEstimated: false,
      costUsd: null,
      msPerMessage: 0,
      modelMsPerCall: 0,
    },
    contentGaps: [],
    byDay: [],
  };
  const days = new Map<string, Partial<Record<RehearsalOutcomeKind, number>>>();
  let elapsed = 0;
  let modelMs = 0;
  for (const row of rows) {
    const { result } = row;
    elapsed += result.elapsedMs;
    if (result.modelMs !== null) {
      report.model.calls += 1;
      modelMs += result.modelMs;
    }
    if (result.usage) {
      report.model.inputTokens += result.usage.inputTokens;
      report.model.outputTokens += result.usage.outputTokens;
      if (result.usage.estimated) report.model.tokensEstimated = true;
    }
    if (result.receivedAt) {
      const day = result.receivedAt.slice(0, 10);
      const entry = days.get(day) ?? {};
      entry[row.outcome] = (entry[row.outcome] ?? 0) + 1;
      days.set(day, entry);
    }
    const subject = result.subject || '(no subject)';
    switch (row.outcome) {
      case 'answered': {
        outcomes.answered.total += 1;
        if (row.reason === 'approval') outcomes.answered.afterApproval += 1;
        const team = result.team;
        if (team === null || team.escalated || team.afterMs > settings.slowAnswerMs)
          report.agentWouldAnswer.push({
            messageId: row.messageId,
            subject,
            teamAfterMs: team?.afterMs ?? null,
            escalated: team?.escalated ?? false,
            unanswered: team === null,
          });
        break;
      }
      case 'handed-off':
        countByReason(outcomes.handedOff, row.reason);
        if (result.team !== null && result.team.lines <= 1)
          report.handedOffOneLiners.push({
            messageId: row.messageId,
            subject,
            teamAnswer: firstLine(result.team.text),
          });
        break;
      case 'skipped':
        countByReason(outcomes.skipped, row.reason);
        break;
      case 'held':
        outcomes.held.total += 1;
        for (const rule of (row.reason ?? 'unknown').split('+')) bump(outcomes.held.byRule, rule);
        break;
      case 'covered':
        outcomes.covered += 1;
        break;
      case 'model-failed':
        countByReason(outcomes.modelFailed, row.reason);
        break;
      case 'unreadable':
        outcomes.unreadable.total += 1;
        outcomes.unreadable.messages.push(row.messageId);
        break;
    }
    // A question no article covered: handed off with no article found, or none the drafter could cite.
    const draft = result.draft;
    if (
      draft !== null &&
      row.outcome === 'handed-off' &&
      (draft.considered.length === 0 || row.reason === 'no-citation')
    )
      report.contentGaps.push({ messageId: row.messageId, subject, question: firstLine(result.text).slice(0, 300) });
  }
  report.model.msPerMessage = rows.length > 0 ? Math.round(elapsed / rows.length) : 0;
  report.model.modelMsPerCall = report.model.calls > 0 ? Math.round(modelMs / report.model.calls) : 0;
  if (settings.inputPricePerMTok !== undefined || settings.outputPricePerMTok !== undefined) {
    const cost =
      (report.model.inputTokens / 1e6) * (settings.inputPricePerMTok ?? 0) +
      (report.model.outputTokens / 1e6) * (settings.outputPricePerMTok ?? 0);
    report.model.costUsd = Math.round(cost * 10_000) / 10_000;
  }
  report.byDay = [...days.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([day, counts]) => ({ day, ...counts }));
  return report;
}

/** Bars of the outcomes by reason: what the desk's chart and the Markdown table show. */
export function outcomeBars(
  report: RehearsalReport,
): Array<{ label: string; count: number; outcome: RehearsalOutcomeKind }> {
  const o = report.outcomes;
  const bars: Array<{ label: string; count: number; outcome: RehearsalOutcomeKind }> = [];
  if (o.answered.total > 0) bars.push({ label: 'answered', count: o.answered.total, outcome: 'answered' });
  for (const [reason, n] of Object.entries(o.handedOff.byReason))
    bars.push({ label: `handed off: ${reason}`, count: n, outcome: 'handed-off' });
  for (const [rule, n] of Object.entries(o.held.byRule))
    bars.push({ label: `held: ${rule}`, count: n, outcome: 'held' });
  for (const [reason, n] of Object.entries(o.skipped.byReason))
    bars.push({ label: `skipped: ${reason}`, count: n, outcome: 'skipped' });
  if (o.covered > 0) bars.push({ label: 'answered together (burst)', count: o.covered, outcome: 'covered' });
  for (const [reason, n] of Object.entries(o.modelFailed.byReason))
    bars.push({ label: `model failed: ${reason}`, count: n, outcome: 'model-failed' });
  if (o.unreadable.total > 0)
    bars.push({ label: 'could not be read', count: o.unreadable.total, outcome: 'unreadable' });
  return bars;
}

/** A wait as a lead reads it: minutes, hours, or days past two of them (the report and the desk alike). */
export const readableDuration = (ms: number): string => {
  const hours = ms / 3_600_000;
  return hours >= 48
    ? `${Math.round(hours / 24)} days`
    : hours >= 1
      ? `${Math.round(hours)} h`
      : `${Math.round(ms / 60_000)} min`;
};

/** What the team did with a message the agent would answer: no answer, or after how long (escalated or not). */
export const whatTheTeamDid = (a: RehearsalReport['agentWouldAnswer'][number]): string =>
  a.unanswered
    ? 'no answer'
    : `${a.escalated ? 'escalated, ' : ''}answered after ${readableDuration(a.teamAfterMs ?? 0)}`;
const cell = (text: string) => text.replace(/[|\r\n]+/g, ' ').slice(0, 120);

export function reportMarkdown(report: RehearsalReport): string {
  const r = report.rehearsal;
  const o = report.outcomes;
  const lines = [
    `# Rehearsal ${r.rehearsalId}`,
    '',
    `Inbox \`${r.inboxId}\`, ${r.from.toISOString()} to ${r.to.toISOString()}: ${report.rehearsed} of ${report.chosen} messages rehearsed` +
      (r.sampled ? ` (a sample of ${r.limit} out of ${r.listedTotal ?? '?'} inbound)` : '') +
      (r.truncated && !r.sampled
        ? ` (the period holds more than the limit of ${r.limit}: use --sample to spread it)`
        : '') +
      '.',
    `Drafter \`${String(r.configuration.drafter)}\`. Deleted after ${r.expiresAt.toISOString()}.`,
    '',
    '| outcome | messages |',
    '|---|---|',
    `| answered | ${o.answered.total}${o.answered.afterApproval > 0 ? ` (${o.answered.afterApproval} after a reviewer's approval)` : ''} |`,
    `| handed off | ${o.handedOff.total} |`,
    ...Object.entries(o.handedOff.byReason).map(([k, n]) => `| · handed off: ${k} | ${n} |`),
    `| held | ${o.held.total} |`,
    ...Object.entries(o.held.byRule).map(([k, n]) => `| · held: ${k} | ${n} |`),
    `| skipped | ${o.skipped.total} |`,
    ...Object.entries(o.skipped.byReason).map(([k, n]) => `| · skipped: ${k} | ${n} |`),
    `| answered together (burst) | ${o.covered} |`,
    `| model failed | ${o.modelFailed.total} |`,
    ...Object.entries(o.modelFailed.byReason).map(([k, n]) => `| · model failed: ${k} | ${n} |`),
    `| could not be read | ${o.unreadable.total} |`,
    '',
    `**Model**: ${report.model.calls} calls, ${report.model.inputTokens} input and ${report.model.outputTokens} output tokens` +
      `${report.model.tokensEstimated ? ' (estimated, 4 characters a token: the drafter reports none)' : ''}, ` +
      `${report.model.costUsd === null ? 'cost not estimated (set REHEARSAL_INPUT_PRICE_PER_MTOK and REHEARSAL_OUTPUT_PRICE_PER_MTOK)' : `about $${report.model.costUsd}`}; ` +
      `${report.model.msPerMessage} ms per message, ${report.model.modelMsPerCall} ms per model call.`,
    '',
    `## Where the agent would answer although the team took days, escalated or did not answer (${report.agentWouldAnswer.length})`,
    '',
    ...(report.agentWouldAnswer.length === 0 ? ['None.'] : ['| message | subject | the team |', '|---|---|---|']),
    ...report.agentWouldAnswer.map((a) => `| \`${cell(a.messageId)}\` | ${cell(a.subject)} | ${whatTheTeamDid(a)} |`),
    '',
    `## Where the agent hands off what the team answered in one line (${report.handedOffOneLiners.length})`,
    '',
    ...(report.handedOffOneLiners.length === 0
      ? ['None.']
      : ['| message | subject | the team answered |', '|---|---|---|']),
    ...report.handedOffOneLiners.map(
      (h) => `| \`${cell(h.messageId)}\` | ${cell(h.subject)} | ${cell(h.teamAnswer)} |`,
    ),
    '',
    `## Questions no article covered (${report.contentGaps.length})`,
    '',
    ...(report.contentGaps.length === 0
      ? ['None.']
      : report.contentGaps.map((g) => `- ${cell(g.subject)}: ${cell(g.question)}`)),
  ];
  if (o.unreadable.total > 0)
    lines.push('', '## Messages AgentMail could not give us', '', ...o.unreadable.messages.map((m) => `- \`${m}\``));
  return `${lines.join('\n')}\n`;
}

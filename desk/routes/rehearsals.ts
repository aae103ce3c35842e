import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { compareRehearsals } from '../../activities/rehearsal/compare';
import {
  loadRows,
  outcomeBars,
  readableDuration,
  rehearsalReport,
  type RehearsalReport,
  type RehearsedRow,
  whatTheTeamDid,
} from '../../activities/rehearsal/report';
import { findRehearsal, listRehearsals, type Rehearsal } from '../../activities/rehearsal/store';
import type { RehearsalOutcomeKind } from '../../contract/rehearsal';
import type { Db } from '../../lib/db';
import { html, type Html } from '../html';
import { frame, htmlReply } from '../respond';
import type { SignedIn } from '../sessions';
import { mayReview } from '../sessions';
import { listTable, page, type Frame } from '../views';

/**
 * The rehearsals in the desk (docs/rehearsal.md): the list, one rehearsal's report with the same
 * figures as `npm run rehearse -- --report`, a chart of its outcomes by reason, each message beside
 * what the team sent, and the comparison with another rehearsal. A reviewer sees the rehearsals of
 * the inboxes they review, and nothing of any other (a 404, as for a message).
 *
 * A route file of its own: desk/app.ts registers it beside the others with
 * `void app.register(rehearsalRoutes, { db: options.db })`.
 */

export interface RehearsalRoutesOptions {
  db: Db;
  /** REHEARSAL_SLOW_ANSWER: past this a team's answer counts as slow (default 2 days). */
  slowAnswerMs?: number;
  inputPricePerMTok?: number;
  outputPricePerMTok?: number;
}

const DEFAULT_SLOW_ANSWER_MS = 2 * 24 * 60 * 60 * 1000;
/** Messages shown side by side on one page. */
const PAGE_SIZE = 50;

export async function rehearsalRoutes(app: FastifyInstance, options: RehearsalRoutesOptions): Promise<void> {
  const settings = {
    slowAnswerMs: options.slowAnswerMs ?? DEFAULT_SLOW_ANSWER_MS,
    inputPricePerMTok: options.inputPricePerMTok,
    outputPricePerMTok: options.outputPricePerMTok,
  };
  const send = htmlReply;
  const notFound = (request: FastifyRequest, reply: FastifyReply) =>
    send(
      reply,
      404,
      page(
        'Not found',
        frame(request, reply),
        html`<h1>Not found</h1>
          <p>No such rehearsal for you.</p>`,
      ),
    );
  /** The rehearsal, when this reviewer reviews its inbox. */
  const visible = async (reviewer: SignedIn, id: string): Promise<Rehearsal | null> => {
    const rehearsal = await findRehearsal(options.db, id);
    return rehearsal !== null && mayReview(reviewer, rehearsal.inboxId) ? rehearsal : null;
  };

  app.get('/rehearsals', async (request, reply) => {
    const reviewer = request.reviewer as SignedIn;
    const rehearsals = await listRehearsals(options.db, reviewer.inboxes);
    return send(reply, 200, listPage(frame(request, reply), rehearsals));
  });

  app.get<{ Params: { id: string }; Querystring: { against?: string; page?: string } }>(
    '/rehearsals/:id',
    async (request, reply) => {
      const reviewer = request.reviewer as SignedIn;
      const rehearsal = await visible(reviewer, request.params.id);
      if (rehearsal === null) return notFound(request, reply);
      const against = request.query.against?.trim();
      if (against) {
        const other = await visible(reviewer, against);
        if (other === null) return notFound(request, reply);
        const comparison = compareRehearsals(
          rehearsal.rehearsalId,
          await loadRows(options.db, rehearsal.rehearsalId),
          other.rehearsalId,
          await loadRows(options.db, other.rehearsalId),
        );
        return send(reply, 200, comparePage(frame(request, reply), comparison));
      }
      const report = await rehearsalReport(options.db, rehearsal.rehearsalId, settings);
      if (report === null) return notFound(request, reply);
      const pageNumber = Math.max(1, Number.parseInt(request.query.page ?? '1', 10) || 1);
      const rows = await loadRows(options.db, rehearsal.rehearsalId);
      const others = (await listRehearsals(options.db, reviewer.inboxes)).filter(
        (r) => r.inboxId === rehearsal.inboxId && r.rehearsalId !== rehearsal.rehearsalId,
      );
      return send(reply, 200, reportPage(frame(request, reply), report, rows, pageNumber, others));
    },
  );
}

function listPage(frame: Frame, rehearsals: Rehearsal[]): string {
  const rows = rehearsals.map(
    (r) =>
      html`<tr>
        <td><a href="/rehearsals/${encodeURIComponent(r.rehearsalId)}">${r.rehearsalId}</a></td>
        <td>${r.inboxId}</td>
        <td>${day(r.from)} – ${day(r.to)}</td>
        <td>${String(r.configuration.drafter)}</td>
        <td>${r.finishedAt ? 'finished' : 'running or stopped'}</td>
      </tr>`,
  );
  return page(
    'Rehearsals',
    frame,
    html`<h1>Rehearsals</h1>
      <p class="hint">
        What the agent would have done with past mail, beside what the team did. Start one with
        <code>npm run rehearse -- --inbox &lt;inbox&gt; --since 14d</code>.
      </p>
      ${listTable({
        rows,
        empty: 'No rehearsal of your inboxes.',
        caption: 'Rehearsals of the inboxes you review, newest first',
        columns: ['Rehearsal', 'Inbox', 'Period', 'Drafter', 'State'],
      })}`,
  );
}

const COLOURS: Record<RehearsalOutcomeKind, string> = {
  answered: '#1f6f3f',
  'handed-off': '#8a5a00',
  held: '#9c3d00',
  skipped: '#4a5566',
  covered: '#2d5f8a',
  'model-failed': '#8a1c1c',
  unreadable: '#5b2d82',
};

/** Outcomes by reason as horizontal bars: an inline SVG (the desk's CSP allows no script, and needs none). */
export function outcomeChart(report: RehearsalReport): Html {
  const bars = outcomeBars(report);
  const max = Math.max(1, ...bars.map((b) => b.count));
  const rowHeight = 26;
  const labelWidth = 260;
  const barWidth = 380;
  const height = bars.length * rowHeight + 10;
  const rects = bars.map(
    (b, i) =>
      html`<g>
        <text x="${labelWidth - 8}" y="${i * rowHeight + 18}" text-anchor="end" font-size="13" fill="#1b1b1b"
          >${b.label}</text
        >
        <rect
          x="${labelWidth}"
          y="${i * rowHeight + 5}"
          width="${Math.max(2, Math.round((b.count / max) * barWidth))}"
          height="18"
          fill="${COLOURS[b.outcome]}"
        ></rect>
        <text
          x="${labelWidth + Math.max(2, Math.round((b.count / max) * barWidth)) + 6}"
          y="${i * rowHeight + 18}"
          font-size="13"
          fill="#1b1b1b"
          >${b.count}</text
        >
      </g>`,
  );
  const summary = bars.map((b) => `${b.label}: ${b.count}`).join('; ');
  return html`<figure>
    <svg
      role="img"
      aria-labelledby="chart-title chart-desc"
      width="${labelWidth + barWidth + 60}"
      height="${height}"
      viewBox="0 0 ${labelWidth + barWidth + 60} ${height}"
    >
      <title id="chart-title">Outcomes by reason</title>
      <desc id="chart-desc">${summary}</desc>
      ${rects}
    </svg>
    <figcaption>Outcomes by reason, ${report.rehearsed} messages</figcaption>
  </figure>`;
}

function reportPage(
  frame: Frame,
  report: RehearsalReport,
  rows: RehearsedRow[],
  pageNumber: number,
  others: Rehearsal[],
): string {
  const r = report.rehearsal;
  const o = report.outcomes;
  const shown = rows.slice((pageNumber - 1) * PAGE_SIZE, pageNumber * PAGE_SIZE);
  /** One figure of the report and its count by reason (or by rule), as a term of the list. */
  const countedBy = (label: string, total: number, counts: Record<string, number>) =>
    html`<dt>${label}</dt>
      <dd>
        ${total}
        <ul>
          ${Object.entries(counts).map(([k, n]) => html`<li>${k}: ${n}</li>`)}
        </ul>
      </dd>`;
  const model = report.model;
  return page(
    `Rehearsal ${r.rehearsalId}`,
    frame,
    html`<h1>Rehearsal ${r.rehearsalId}</h1>
      <p>
        Inbox <strong>${r.inboxId}</strong>, ${day(r.from)} – ${day(r.to)}: ${report.rehearsed} of ${report.chosen}
        messages
        rehearsed${
          r.sampled ? ` (a sample of ${r.limit} out of ${r.listedTotal ?? '?'})` : ''
        }${r.truncated && !r.sampled ? ` (the period holds more than ${r.limit})` : ''}.
        Drafter ${String(r.configuration.drafter)}. Deleted after ${day(r.expiresAt)}.
      </p>
      ${outcomeChart(report)}
      <h2>Figures</h2>
      <dl class="facts">
        <dt>Answered</dt>
        <dd>
          ${o.answered.total}${o.answered.afterApproval > 0 ? ` (${o.answered.afterApproval} after a reviewer's approval)` : ''}
        </dd>
        ${countedBy('Handed off', o.handedOff.total, o.handedOff.byReason)}
        ${countedBy('Held', o.held.total, o.held.byRule)} ${countedBy('Skipped', o.skipped.total, o.skipped.byReason)}
        <dt>Answered together</dt>
        <dd>${o.covered}</dd>
        ${countedBy('Model failed', o.modelFailed.total, o.modelFailed.byReason)}
        <dt>Could not be read</dt>
        <dd>${o.unreadable.total}</dd>
        <dt>Model</dt>
        <dd>
          ${model.calls} calls, ${model.inputTokens} input and ${model.outputTokens} output
          tokens${model.tokensEstimated ? ' (estimated)' : ''};
          ${model.costUsd === null ? 'cost not estimated' : `about $${model.costUsd}`}; ${model.msPerMessage} ms per
          message
        </dd>
      </dl>
      <h2>
        Where the agent would answer although the team took days, escalated or did not answer
        (${report.agentWouldAnswer.length})
      </h2>
      ${list(report.agentWouldAnswer.map((a) => html`${a.subject} — ${whatTheTeamDid(a)}`))}
      <h2>Where the agent hands off what the team answered in one line (${report.handedOffOneLiners.length})</h2>
      ${list(report.handedOffOneLiners.map((h) => html`${h.subject} — the team: “${h.teamAnswer}”`))}
      <h2>Questions no article covered (${report.contentGaps.length})</h2>
      ${list(report.contentGaps.map((g) => html`${g.subject}: ${g.question}`))}
      ${
        others.length > 0
          ? html`<h2>Compare</h2>
              <form method="get" action="/rehearsals/${encodeURIComponent(r.rehearsalId)}" class="inline">
                <label for="against">Compare with</label>
                <select id="against" name="against">
                  ${others.map((x) => html`<option value="${x.rehearsalId}">${x.rehearsalId} (${String(x.configuration.drafter)})</option>`)}
                </select>
                <button type="submit">Compare</button>
              </form>`
          : ''
      }
      <h2>Message by message</h2>
      ${shown.map((row) => messageBlock(row))}
      <nav aria-label="Pages">
        ${pageNumber > 1 ? html`<a href="?page=${pageNumber - 1}">Earlier messages</a>` : ''}
        ${pageNumber * PAGE_SIZE < rows.length ? html` <a href="?page=${pageNumber + 1}">Later messages</a>` : ''}
      </nav>`,
  );
}

function messageBlock(row: RehearsedRow): Html {
  const { result } = row;
  const draft = result.draft;
  return html`<section class="columns" aria-label="Message ${row.position + 1}">
    <article class="mail this">
      <h3>The customer <time>${result.receivedAt ? result.receivedAt.slice(0, 16).replace('T', ' ') : ''}</time></h3>
      <p class="subject">${result.subject || '(no subject)'}</p>
      <pre>${result.text || '(not read)'}</pre>
      <h3>Our real answer${result.team ? html` <time>after ${readableDuration(result.team.afterMs)}</time>` : ''}</h3>
      ${result.team ? html`<pre>${result.team.text}</pre>` : html`<p class="empty">None in the thread.</p>`}
    </article>
    <article class="mail">
      <h3>The agent: <span class="status">${outcomeLabel(row)}</span></h3>
      ${
        draft
          ? html`<pre>${draft.text}</pre>
              <p class="hint">
                Cites:
                ${draft.citations.length > 0 ? draft.citations.join(', ') : 'nothing'}${draft.handoffReason ? html`. Why a person: ${draft.handoffReason}` : ''}
              </p>`
          : html`<p class="empty">
              ${result.coveredBy ? 'Answered by the reply to a later message of the same burst.' : result.failure ? `No draft (${result.failure}).` : 'No draft: no reply owed.'}
            </p>`
      }
    </article>
  </section>`;
}

function comparePage(frame: Frame, comparison: ReturnType<typeof compareRehearsals>): string {
  const rows = comparison.changed.map(
    (c) =>
      html`<tr>
        <td>${c.subject}</td>
        <td>${c.before ? label(c.before) : '—'}</td>
        <td>${c.after ? label(c.after) : '—'}</td>
        <td>${c.changes.join('; ')}</td>
      </tr>`,
  );
  return page(
    `Rehearsal ${comparison.a} against ${comparison.b}`,
    frame,
    html`<h1>${comparison.a} → ${comparison.b}</h1>
      <p>${comparison.compared} messages rehearsed by both; ${comparison.changed.length} changed.</p>
      ${listTable({
        rows,
        empty: 'Nothing changed.',
        caption: 'The messages whose outcome changed',
        columns: ['Subject', comparison.a, comparison.b, 'What changed'],
      })}
      <p><a href="/rehearsals/${encodeURIComponent(comparison.a)}">Back to ${comparison.a}</a></p>`,
  );
}

const list = (items: Html[]): Html =>
  items.length === 0
    ? html`<p class="empty">None.</p>`
    : html`<ul>
        ${items.map((i) => html`<li>${i}</li>`)}
      </ul>`;
const label = (x: { outcome: string; reason: string | null }) => (x.reason ? `${x.outcome} (${x.reason})` : x.outcome);
const outcomeLabel = (row: RehearsedRow) => label(row);
const day = (at: Date) => at.toISOString().slice(0, 10);

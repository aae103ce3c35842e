import { diffLines } from 'diff';
import { html, type Html } from './html';
import type { SignedIn } from './sessions';
import type { QueueRow, QueueSort } from './queue-details';
import { QUEUE_SORTS } from './queue-details';
import { WAITING_STATUSES } from './waiting';
import type { ReviewState } from '../contract';

/** The desk's pages. Server-rendered, no script; the one stylesheet is /desk.css (CSP default-src 'self'). */

export interface Frame {
  reviewer: SignedIn | null;
  csrf: string;
}

export function page(title: string, frame: Frame, body: Html): string {
  const signOut = frame.reviewer
    ? html`<form method="post" action="/sign-out" class="inline">
        <input type="hidden" name="_csrf" value="${frame.csrf}" />
        <span>Signed in as <strong>${frame.reviewer.name}</strong></span>
        <button type="submit">Sign out</button>
      </form>`
    : '';
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · replyonce review desk</title>
        <link rel="stylesheet" href="/desk.css" />
      </head>
      <body>
        <header>
          <a href="/" class="brand">replyonce review desk</a>
          ${signOut}
        </header>
        <main>${body}</main>
      </body>
    </html>`.value;
}

export function signInPage(frame: Frame, problem: string | null): string {
  return page(
    'Sign in',
    frame,
    html`<h1>Sign in</h1>
      ${problem ? html`<p class="notice error" role="alert">${problem}</p>` : ''}
      <form method="post" action="/sign-in" class="stack">
        <input type="hidden" name="_csrf" value="${frame.csrf}" />
        <label for="token">Your reviewer token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
      </form>
      <p class="hint">An operator gives you a token with <code>npm run reviewer -- add</code>.</p>`,
  );
}

const age = (since: Date, now: Date): string => {
  const minutes = Math.max(0, Math.floor((now.getTime() - since.getTime()) / 60_000));
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} days`;
};

const STATUS_LABEL: Record<string, string> = {
  awaiting_approval: 'awaiting approval',
  escalated: 'escalated',
  held: 'held by a rule',
  handed_off: 'handed off',
  sending: 'approved: being sent',
  sent: 'sent',
  rejected: 'rejected: nothing sent',
  'answered-together': 'answered together with a later message',
};

export const statusLabel = (status: string): string => STATUS_LABEL[status] ?? status.replace(/_/g, ' ');

const when = (at: Date): string => `${at.toISOString().replace('T', ' ').slice(0, 16)} UTC`;

export function queuePage(
  frame: Frame,
  queue: {
    messages: QueueRow[];
    more: boolean;
    inboxes: string[];
    inbox: string | null;
    q: string | null;
    sort: QueueSort;
    now: Date;
  },
): string {
  const rows = queue.messages.map(
    (m) =>
      html`<tr>
        <th scope="row">
          <a href="/messages/${encodeURIComponent(m.workflowId)}">${m.subject ?? '(no subject)'}</a>
        </th>
        <td>${m.from ?? '—'}</td>
        <td>${m.inboxId}</td>
        <td>
          <time datetime="${m.arrivedAt.toISOString()}">${when(m.arrivedAt)}</time> (${age(m.arrivedAt, queue.now)} ago)
        </td>
        <td>${m.threadLength === null ? '—' : `${m.threadLength} ${m.threadLength === 1 ? 'message' : 'messages'}`}</td>
        <td><span class="status ${m.status}">${statusLabel(m.status)}</span><br />${m.reason ?? ''}</td>
      </tr>`,
  );
  const options = queue.inboxes.map(
    (inbox) => html`<option value="${inbox}" ${inbox === queue.inbox ? html`selected` : ''}>${inbox}</option>`,
  );
  const sorts = Object.entries(QUEUE_SORTS).map(
    ([value, label]) => html`<option value="${value}" ${value === queue.sort ? html`selected` : ''}>${label}</option>`,
  );
  const filtered = queue.inbox !== null || queue.q !== null;
  return page(
    'Waiting',
    frame,
    html`<h1>Waiting for a person</h1>
      <p>
        <a href="/threads">Threads a person answers</a> (the agent leaves them to the team until handed back) ·
        <a href="/rehearsals">Rehearsals</a> (what the agent would have done with past mail)
      </p>
      <form method="get" action="/" class="inline filter">
        <label for="inbox">Inbox</label>
        <select id="inbox" name="inbox">
          <option value="">All inboxes</option>
          ${options}
        </select>
        <label for="q">Subject or customer</label>
        <input id="q" name="q" type="search" value="${queue.q ?? ''}" />
        <label for="sort">Sort by</label>
        <select id="sort" name="sort">
          ${sorts}
        </select>
        <button type="submit">Filter</button>
      </form>
      ${listTable({
        rows,
        empty: `Nothing is waiting${filtered ? ' that matches' : ''}.`,
        caption: html`${queue.messages.length} ${queue.messages.length === 1 ? 'message' : 'messages'},
        ${QUEUE_SORTS[queue.sort]}${queue.more ? ' (more are waiting: decide on these first)' : ''}`,
        columns: ['Subject', 'Customer', 'Inbox', 'Came', 'Conversation', 'Status'],
      })}`,
  );
}

/**
 * The desk's lists (the queue, held threads, rehearsals, a comparison): a table of rows under
 * column headings, or one line saying there is nothing to list.
 */
export function listTable(list: {
  rows: readonly Html[];
  empty: string;
  caption?: Html | string;
  columns: readonly string[];
}): Html {
  if (list.rows.length === 0) return html`<p class="empty">${list.empty}</p>`;
  return html`<table>
    ${
      list.caption !== undefined
        ? html`<caption>
            ${list.caption}
          </caption>`
        : ''
    }
    <thead>
      <tr>
        ${list.columns.map((c) => html`<th scope="col">${c}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${list.rows}
    </tbody>
  </table>`;
}

export interface ThreadMessage {
  from: string;
  at: Date;
  subject: string | null;
  text: string;
  isThisOne: boolean;
}

export interface MessageView {
  workflowId: string;
  inboxId: string;
  state: ReviewState;
  draft: {
    text: string;
    citations: Citation[];
    /** The customer's language as detected (ISO 639-1), null when it could not be named. */
    language: string | null;
    /** What was attached (never its bytes): each links to AgentMail's copy through the desk. */
    attachments: Array<{
      id: string;
      filename: string | null;
      contentType: string | null;
      size: number;
      read: boolean;
    }>;
  } | null;
  thread: ThreadMessage[] | { problem: string };
  /** The verdict that stands, when one does. */
  outcome: Outcome | null;
  /** What became of this reviewer's last action on the page (`pending`: sent, not confirmed). */
  notice: { kind: 'ok' | 'error' | 'pending'; text: string } | null;
  /** The editor's text, when the page is shown again after a refused edit. */
  editing: string | null;
}

export interface Citation {
  title: string;
  url: string | null;
  /** The cited section's heading and the start of its text (drafts stored before these have neither). */
  heading?: string | null;
  text?: string | null;
}

/** The verdict that stands, by whom, and the text that went or will go out (from the store, not history). */
export interface Outcome {
  verdict: 'approve' | 'reject';
  /** The reviewer's name (an id that is no reviewer of ours, as it is). */
  by: string;
  revision: number;
  /** Whether the reviewer's edit is what goes out; null until the worker has recorded the verdict. */
  edited: boolean | null;
  /** The approved (or rejected) text; null until recorded. */
  text: string | null;
}

/** The status as it becomes: a verdict stands while the run has not yet moved on from waiting. */
export function statusAsItBecomes(state: ReviewState): string {
  const stillWaiting = (WAITING_STATUSES as readonly string[]).includes(state.status);
  if (state.verdict === null || !stillWaiting) return state.status;
  return state.verdict.verdict === 'approve' ? 'sending' : 'rejected';
}

function verdictSection(outcome: Outcome, status: string): Html {
  const approved = outcome.verdict === 'approve';
  const what = approved ? (outcome.edited ? 'approved with an edit' : 'approved') : 'rejected';
  const heading =
    outcome.text === null
      ? 'The text is being recorded: reload in a moment to see it.'
      : approved
        ? status === 'sent'
          ? 'The reply that went out'
          : 'The reply that will go out'
        : 'The draft that was rejected (nothing is sent)';
  return html`<section aria-labelledby="verdict" class="verdict ${outcome.verdict}">
    <h2 id="verdict">The verdict</h2>
    <p class="standing" role="status">
      <strong>${what[0]?.toUpperCase()}${what.slice(1)}</strong> by <strong>${outcome.by}</strong>, on revision
      ${outcome.revision}.
    </p>
    <h3>${heading}</h3>
    ${outcome.text === null ? '' : html`<pre class="sent">${outcome.text}</pre>`}
  </section>`;
}

/** The articles the draft rests on: each one's title (a link when it has one), section and text, never a bare id. */
export function citationList(citations: Citation[]): Html | string {
  if (citations.length === 0) return '';
  return html`<h3>Cited articles</h3>
    <ul class="citations">
      ${citations.map(
        (c) =>
          html`<li>
            ${c.url ? html`<a href="${c.url}" rel="noreferrer noopener">${c.title}</a>` : html`<strong>${c.title}</strong>`}
            ${c.heading ? html` — ${c.heading}` : ''} ${c.text ? html`<blockquote>${c.text}</blockquote>` : ''}
          </li>`,
      )}
    </ul>`;
}

const languageNames = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });
const languageName = (code: string | null): string =>
  code === null ? 'not detected' : `${languageNames.of(code) ?? code} (${code})`;
const sizeOf = (bytes: number): string =>
  bytes >= 1_048_576 ? `${(bytes / 1_048_576).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;

export function messagePage(frame: Frame, view: MessageView): string {
  const { state } = view;
  const waiting = state.revision !== null && state.verdict === null && view.draft !== null;
  const status = statusAsItBecomes(state);
  const action = `/messages/${encodeURIComponent(view.workflowId)}`;
  const thread = Array.isArray(view.thread)
    ? view.thread.map(
        (m) =>
          html`<article class="mail ${m.isThisOne ? 'this' : ''}">
            <h3>
              ${m.from}
              <time datetime="${m.at.toISOString()}">${when(m.at)}</time>
            </h3>
            ${m.subject ? html`<p class="subject">${m.subject}</p>` : ''}
            <pre>${m.text}</pre>
          </article>`,
      )
    : html`<p class="notice error" role="alert">${view.thread.problem}</p>`;
  // Approving is in the editor's form: the browser sends the text the editor holds, and the desk
  // sends the draft as drafted only while that text is the draft unchanged (desk/forms.ts).
  const decide = waiting
    ? html`<section aria-labelledby="decide">
        <h2 id="decide">Your verdict</h2>
        <form method="post" action="${action}/review" class="stack">
          <input type="hidden" name="_csrf" value="${frame.csrf}" />
          <input type="hidden" name="revision" value="${state.revision}" />
          <label for="text">Edit the reply here if it needs it: approving sends what this box holds</label>
          <textarea id="text" name="text" rows="12">${view.editing ?? view.draft?.text ?? ''}</textarea>
          <div class="actions">
            <button type="submit" name="verdict" value="approve" class="approve">Approve and send</button>
            <button type="submit" formaction="${action}/preview">Show my changes</button>
          </div>
          <p class="hint">
            With an edit, <em>Approve and send</em> first shows your changes against the draft; nothing is sent until
            you approve them there.
          </p>
        </form>
        <form method="post" action="${action}/review" class="actions">
          <input type="hidden" name="_csrf" value="${frame.csrf}" />
          <input type="hidden" name="revision" value="${state.revision}" />
          <input type="hidden" name="verdict" value="reject" />
          <button type="submit" class="reject">Reject (send nothing)</button>
        </form>
      </section>`
    : '';
  const draftSection = waiting
    ? html`<section aria-labelledby="draft">
        <h2 id="draft">The draft (revision ${state.revision})</h2>
        <pre class="draft">${view.draft?.text ?? ''}</pre>
        ${citationList(view.draft?.citations ?? [])}
      </section>`
    : view.outcome
      ? verdictSection(view.outcome, status)
      : html`<section aria-labelledby="draft">
          <h2 id="draft">The draft</h2>
          <p class="empty">No draft awaits a verdict (status: ${statusLabel(status)}).</p>
        </section>`;
  const noticeRole = view.notice?.kind === 'error' ? 'alert' : 'status';
  return page(
    'Message',
    frame,
    html`<p><a href="/">← Back to the queue</a></p>
      <h1>A reply in ${view.inboxId}</h1>
      ${view.notice ? html`<p class="notice ${view.notice.kind}" role="${noticeRole}">${view.notice.text}</p>` : ''}
      <dl class="facts">
        <dt>Status</dt>
        <dd><span class="status ${status}">${statusLabel(status)}</span></dd>
        <dt>Why a person looks</dt>
        <dd>${state.reason ?? (view.outcome ? 'decided' : '—')}</dd>
        <dt>Revision</dt>
        <dd>${state.revision ?? view.outcome?.revision ?? '—'}</dd>
        ${
          view.draft
            ? html`<dt>Language</dt>
                <dd>${languageName(view.draft.language)}</dd>`
            : ''
        }
        ${
          view.draft && view.draft.attachments.length > 0
            ? html`<dt>Attachments</dt>
                <dd>
                  <ul class="attachments">
                    ${view.draft.attachments.map(
                      (a) =>
                        html`<li>
                          <a href="${action}/attachments/${encodeURIComponent(a.id)}" rel="noreferrer noopener"
                            >${a.filename ?? '(no name)'}</a
                          >
                          (${a.contentType ?? 'unknown type'}, ${sizeOf(a.size)}${a.read ? ', read for the draft' : ''})
                        </li>`,
                    )}
                  </ul>
                </dd>`
            : ''
        }
      </dl>
      <div class="columns">
        <section aria-labelledby="thread">
          <h2 id="thread">The customer's thread</h2>
          ${thread}
        </section>
        ${draftSection}
      </div>
      ${decide}`,
  );
}

export function previewPage(
  frame: Frame,
  view: {
    workflowId: string;
    inboxId: string;
    revision: number;
    before: string;
    after: string;
    /** Why the diff is shown instead of a verdict (the plain approve pressed after an edit). */
    notice: string | null;
  },
): string {
  const action = `/messages/${encodeURIComponent(view.workflowId)}`;
  // Both end in a line break, so a line added at the end is not shown as the last line changed.
  const parts = diffLines(`${view.before}\n`, `${view.after}\n`);
  const lines = parts.flatMap((part) =>
    part.value
      .replace(/\n$/, '')
      .split('\n')
      .map((line) =>
        part.added
          ? html`<ins><span class="sign" aria-hidden="true">+</span>${line}</ins>`
          : part.removed
            ? html`<del><span class="sign" aria-hidden="true">−</span>${line}</del>`
            : html`<span class="same"><span class="sign" aria-hidden="true"> </span>${line}</span>`,
      ),
  );
  const changed = parts.some((p) => p.added || p.removed);
  return page(
    'Your changes',
    frame,
    html`<p><a href="${action}">← Back to the message</a></p>
      <h1>Your changes to the reply in ${view.inboxId}</h1>
      ${view.notice ? html`<p class="notice pending" role="status">${view.notice}</p>` : ''}
      <p>Removed lines are struck through, added lines underlined, against revision ${view.revision}.</p>
      <pre class="diff" aria-label="Changes to the draft">${lines}</pre>
      ${
        changed
          ? html`<form method="post" action="${action}/review" class="stack">
              <input type="hidden" name="_csrf" value="${frame.csrf}" />
              <input type="hidden" name="revision" value="${view.revision}" />
              <input type="hidden" name="verdict" value="approve" />
              <input type="hidden" name="text" value="${view.after}" />
              <input type="hidden" name="edit" value="confirmed" />
              <button type="submit" class="approve">Approve and send the edited reply</button>
            </form>`
          : html`<p class="notice" role="status">
              You changed nothing: approve the draft as it is on the message page.
            </p>`
      }`,
  );
}

export function problemPage(frame: Frame, title: string, text: string): string {
  return page(
    title,
    frame,
    html`<h1>${title}</h1>
      <p>${text}</p>
      <p><a href="/">Back to the queue</a></p>`,
  );
}

export const STYLESHEET = `
:root { font-family: system-ui, sans-serif; color: #1b1b1b; background: #fff; line-height: 1.45; }
body { margin: 0; }
header { display: flex; justify-content: space-between; align-items: center; padding: .6rem 1.2rem; background: #12324a; color: #fff; }
header a.brand { color: #fff; font-weight: 600; text-decoration: none; }
header button { margin-left: .6rem; }
main { padding: 1rem 1.2rem 3rem; max-width: 78rem; }
a { color: #0b4f85; }
table { border-collapse: collapse; width: 100%; }
caption { text-align: left; padding: .4rem 0; color: #333; }
th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #ccd; vertical-align: top; }
form.inline { display: inline-flex; gap: .5rem; align-items: center; }
form.stack { display: flex; flex-direction: column; gap: .5rem; max-width: 48rem; }
.filter { margin-bottom: 1rem; }
button { font: inherit; padding: .35rem .9rem; border: 1px solid #12324a; background: #f1f4f8; color: #12324a; border-radius: 4px; cursor: pointer; }
button.approve { background: #145c2e; border-color: #145c2e; color: #fff; }
button.reject { background: #8a1c1c; border-color: #8a1c1c; color: #fff; }
textarea, input[type=password], input[type=search] { font: inherit; padding: .4rem; border: 1px solid #666; border-radius: 4px; }
textarea { font-family: ui-monospace, monospace; }
pre { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, monospace; background: #f6f7f9; padding: .7rem; border-radius: 4px; margin: .3rem 0; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5rem; }
@media (max-width: 900px) { .columns { grid-template-columns: 1fr; } }
article.mail { border-left: 3px solid #ccd; padding-left: .7rem; margin-bottom: 1rem; }
article.mail.this { border-left-color: #0b4f85; }
article.mail h3 { font-size: 1rem; margin: 0; }
article.mail time { font-weight: normal; color: #444; margin-left: .5rem; }
.subject { font-weight: 600; margin: .2rem 0; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; }
.notice { padding: .6rem .8rem; border-radius: 4px; background: #eef3f8; border: 1px solid #9bb3cc; }
.notice.ok { background: #e8f4ec; border-color: #6aa77f; }
.notice.error { background: #fbeaea; border-color: #c07070; }
.notice.pending { background: #eef3f8; border-color: #5b7fa6; }
.verdict { border: 1px solid #9bb3cc; border-radius: 4px; padding: .2rem 1rem .8rem; }
.verdict.approve { border-color: #6aa77f; }
.verdict h2 { margin-top: .6rem; }
.status.sending, .status.sent { background: #e8f4ec; }
.actions { display: flex; gap: 1rem; margin: .8rem 0 1.2rem; }
.status { padding: .05rem .4rem; border-radius: 3px; background: #e6e9ef; }
.status.escalated, .status.held { background: #fde8c8; }
.diff ins, .diff del, .diff .same { display: block; text-decoration: none; }
.diff ins { background: #dff3e3; text-decoration: underline; }
.diff del { background: #fbe1e1; text-decoration: line-through; }
.diff .sign { display: inline-block; width: 1.2rem; }
.empty, .hint { color: #444; }
`;

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client } from '@temporalio/client';
import type { Browser } from 'playwright-core';
import pino from 'pino';
import { inboundWorkflowId } from '../lib/hashing';
import { type MessageRef, type ReplyStatus, reviewUpdate } from '../contract';
import { addReviewer, revokeReviewer } from '../review/reviewers';
import { listReviewAudit } from '../review/audit';
import { axeViolations, seriousOrWorse, signIn, startDesk } from './support/desk';
import { Harness } from './support/harness';
import { replyStatusOf } from './support/review';
import { eventually } from './support/temporal';
import { testEnv } from './support/env';
import { CHROMIUM, keepScreenshot, launchChromium } from './support/web-ui';

// The review desk as a reviewer uses it: headless Chromium signs in, finds the waiting message,
// reads the thread and the draft, edits, looks at the diff, approves; rejects another; meets a
// colleague's verdict; is signed out when revoked. The app under test is the real desk on a
// loopback port over the suite's Temporal, Postgres and the sandbox; an axe-core check on each page.
const skip = !existsSync(CHROMIUM)
  ? `Chromium is not installed at ${CHROMIUM} (scripts/setup.sh installs Debian's chromium package; set CHROMIUM_PATH to use another)`
  : false;

let h: Harness;
let browser: Browser;
let desk: Awaited<ReturnType<typeof startDesk>>;
let ada: { id: string; token: string };
let grace: { id: string; token: string };

before(async () => {
  if (skip) return;
  h = await Harness.start({ approvalInboxes: ['*'], approvalTimeoutMs: 10 * 60_000 });
  desk = await startDesk(h);
  browser = await launchChromium();
  const a = await addReviewer(h.db, { name: 'Ada Lovelace' });
  const g = await addReviewer(h.db, { name: 'Grace Hopper' });
  ada = { id: a.reviewer.id, token: a.token };
  grace = { id: g.reviewer.id, token: g.token };
});
after(async () => {
  await browser?.close();
  await desk?.app.close();
  await h?.close();
});

const status = (ref: MessageRef) => replyStatusOf(h, ref);

async function waiting(
  subject: string,
  text: string,
  inboxId = h.newInbox(),
  from = `desk-${randomUUID().slice(0, 8)}@customer.example`,
): Promise<MessageRef> {
  const inbound = await h.sandbox.inbound({ inbox_id: inboxId, from, subject, text });
  const ref = { inboxId, messageId: inbound.message.message_id };
  await eventually(
    async () => (['awaiting_approval', 'escalated'].includes(String(await status(ref))) ? true : undefined),
    'the reply to wait for a person',
  );
  return ref;
}

const messageUrl = (ref: MessageRef) => `${desk.url}/messages/${inboundWorkflowId(ref)}`;
const sentTo = async (ref: MessageRef) =>
  (await h.sandbox.outbox({ inbox_id: ref.inboxId })).filter(
    (e) => e.message.in_reply_to === ref.messageId || e.endpoint.includes('/drafts/'),
  );

async function finalStatus(ref: MessageRef): Promise<ReplyStatus> {
  return (await h.workflowResult(ref)).status;
}

describe('the review desk in a browser', { skip }, () => {
  test('sign in, the queue lists the waiting message; open it: the thread and the draft; edit, the diff, approve → exactly one email with the edited text', async () => {
    const ref = await waiting('Where is my parcel?', 'Order 1234 has not arrived. Can you check?');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await signIn(context, desk.url, ada.token);

    const row = page.getByRole('row').filter({ hasText: ref.inboxId });
    await row.waitFor();
    assert.match(await row.innerText(), /awaiting approval|escalated/);
    assert.match(await row.innerText(), /Where is my parcel\?/, 'the row names the subject');
    const queueViolations = await axeViolations(page);
    assert.deepEqual(seriousOrWorse(queueViolations), [], JSON.stringify(queueViolations, null, 2));
    await keepScreenshot(page, 'desk-queue');

    // The filter by inbox: another inbox's filter hides the row.
    await page.getByLabel('Inbox').selectOption(ref.inboxId);
    await page.getByRole('button', { name: 'Filter' }).click();
    assert.equal(await page.getByRole('row').filter({ hasText: ref.inboxId }).count(), 1);

    await row.getByRole('link', { name: 'Where is my parcel?' }).click();
    await page.waitForURL(messageUrl(ref));
    await page.getByText('Order 1234 has not arrived. Can you check?').waitFor();
    const draft = await page.getByLabel(/Edit the reply/).inputValue();
    assert.equal(
      (await page.locator('pre.draft').innerText()).trim(),
      draft.trim(),
      'the draft is shown as it is stored',
    );
    assert.ok(draft.length > 0, 'the draft is shown');
    assert.match(await page.locator('.facts').innerText(), /Revision\s+1/);
    const messageViolations = await axeViolations(page);
    assert.deepEqual(seriousOrWorse(messageViolations), [], JSON.stringify(messageViolations, null, 2));
    await keepScreenshot(page, 'desk-message');

    const edited = `${draft}\n\nYour parcel left our warehouse today; tracking: <https://example.com/track/1234>.`;
    await page.getByLabel(/Edit the reply/).fill(edited);
    await page.getByRole('button', { name: 'Show my changes' }).click();
    const added = page.locator('.diff ins');
    await added.first().waitFor();
    assert.match(await added.allInnerTexts().then((t) => t.join('\n')), /Your parcel left our warehouse today/);
    assert.equal(await page.locator('.diff del').count(), 0, 'nothing was removed');
    await keepScreenshot(page, 'desk-diff');
    assert.equal((await sentTo(ref)).length, 0, 'nothing is sent before the approval');

    await page.getByRole('button', { name: 'Approve and send the edited reply' }).click();
    await page.getByText('Approved with your edit').waitFor();
    assert.equal(await finalStatus(ref), 'sent');
    // The page after the verdict: who (by name), what went out, the status as it becomes; axe-clean.
    await page.reload();
    const verdict = page.locator('section.verdict');
    assert.match(await verdict.innerText(), /Approved with an edit by Ada Lovelace/);
    assert.equal((await verdict.locator('pre.sent').innerText()).trim(), edited.trim(), 'the text that went out');
    assert.match(await page.locator('.facts').innerText(), /Status\s+sent/);
    assert.equal(await page.locator('.notice.standing, .notice.error').count(), 0, 'not styled as a warning');
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    await keepScreenshot(page, 'desk-after-edit');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.equal(outbox.length, 1, 'exactly one email');
    assert.equal(outbox[0]!.message.text, edited.trim());
    const [audit] = await listReviewAudit(h.db, { workflowId: inboundWorkflowId(ref) });
    assert.equal(audit?.reviewerId, ada.id, 'the audit names the signed-in reviewer');
    assert.equal(audit?.edited, true);
    await context.close();
  });

  test('reject → nothing is sent', async () => {
    const ref = await waiting('Refund', 'I want a refund.');
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, grace.token);
    await page.goto(messageUrl(ref));
    const draft = (await page.locator('pre.draft').innerText()).trim();
    await page.getByRole('button', { name: /^Reject/ }).click();
    await page.getByText('Rejected: nothing will be sent.').waitFor();
    assert.equal(await finalStatus(ref), 'rejected');
    await page.reload(); // the verdict recorded by now, however slow the worker
    const verdict = await page.locator('section.verdict').innerText();
    assert.match(verdict, /Rejected by Grace Hopper/);
    assert.match(verdict, /The draft that was rejected \(nothing is sent\)/);
    assert.equal((await page.locator('section.verdict pre.sent').innerText()).trim(), draft);
    assert.doesNotMatch(await page.locator('.facts').innerText(), /awaiting approval/);
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 0);
    const [audit] = await listReviewAudit(h.db, { workflowId: inboundWorkflowId(ref) });
    assert.equal(audit?.reviewerId, grace.id);
    assert.equal(audit?.verdict, 'reject');
    await context.close();
  });

  test('two reviewers on one message: the second is refused as stale and sees the verdict that stands, while the reply goes out and after', async () => {
    const ref = await waiting('Two pairs of eyes', 'Who answers me?');
    const [first, second] = await Promise.all([browser.newContext(), browser.newContext()]);
    const adaPage = await signIn(first, desk.url, ada.token);
    const gracePage = await signIn(second, desk.url, grace.token);
    const graceLater = await second.newPage();
    await Promise.all([
      adaPage.goto(messageUrl(ref)),
      gracePage.goto(messageUrl(ref)),
      graceLater.goto(messageUrl(ref)),
    ]);

    // The send takes a while: Grace's verdict reaches a run that has accepted Ada's and is still sending.
    await h.sandbox.setFaults({ match: { method: 'POST', path: '/reply', count: 1 }, action: 'delay', ms: 4_000 });
    await adaPage.getByRole('button', { name: 'Approve and send' }).click();
    await adaPage.getByText('Approved: the reply is on its way.').waitFor();
    assert.notEqual(await status(ref), 'sent', 'the reply is still on its way');
    const answer = gracePage.waitForResponse((r) => r.url().endsWith('/review') && r.request().method() === 'POST');
    await gracePage.getByRole('button', { name: /^Reject/ }).click();
    assert.equal((await answer).status(), 409, 'refused: a verdict stands, none is awaited');
    await gracePage.getByText('Your verdict was not applied').waitFor();
    const standing = await gracePage.locator('section.verdict').innerText();
    assert.match(standing, /Approved/);
    assert.ok(standing.includes('Ada Lovelace'), `the verdict that stands names its reviewer: ${standing}`);
    assert.ok(!standing.includes(ada.id), 'by name, not by id');
    assert.equal(await gracePage.getByRole('button', { name: /^Reject/ }).count(), 0, 'nothing left to decide');

    // Once the run has finished, a verdict from a page opened before is refused the same way.
    assert.equal(await finalStatus(ref), 'sent');
    const late = graceLater.waitForResponse((r) => r.url().endsWith('/review') && r.request().method() === 'POST');
    await graceLater.getByRole('button', { name: 'Approve and send' }).click();
    assert.equal((await late).status(), 409);
    assert.match(await graceLater.locator('section.verdict').innerText(), /Approved by Ada Lovelace/);

    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1, 'one email');
    const audit = await listReviewAudit(h.db, { workflowId: inboundWorkflowId(ref) });
    assert.deepEqual(
      audit.map((a) => [a.reviewerId, a.verdict]),
      [[ada.id, 'approve']],
    );
    await Promise.all([first.close(), second.close()]);
  });

  test('a revoked reviewer is signed out at the next request', async () => {
    const { reviewer, token } = await addReviewer(h.db, { name: 'Temporary' });
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, token);
    await revokeReviewer(h.db, reviewer.id);
    await page.reload();
    await page.waitForURL(`${desk.url}/sign-in`);
    assert.equal((await context.cookies()).filter((c) => c.name === 'desk_session').length, 0, 'the cookie is cleared');
    // The same token no longer signs in.
    await page.getByLabel('Your reviewer token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That token is not valid').waitFor();
    await context.close();
  });

  test('the session cookie is HttpOnly and SameSite=Strict; a form post without its CSRF token is refused with 403', async () => {
    const ref = await waiting('Forged', 'A forged form must not decide.');
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, ada.token);
    const session = (await context.cookies()).find((c) => c.name === 'desk_session');
    assert.equal(session?.httpOnly, true);
    assert.equal(session?.sameSite, 'Strict');
    assert.ok((session?.expires ?? -1) > Date.now() / 1000, 'the session has an expiry');

    const forged = await page.request.post(`${messageUrl(ref)}/review`, {
      form: { verdict: 'reject', revision: '1' },
      maxRedirects: 0,
    });
    assert.equal(forged.status(), 403);
    const wrong = await page.request.post(`${messageUrl(ref)}/review`, {
      form: { verdict: 'reject', revision: '1', _csrf: 'not-a-token' },
      maxRedirects: 0,
    });
    assert.equal(wrong.status(), 403);
    assert.match(String(await status(ref)), /awaiting_approval|escalated/, 'the reply still waits');

    const served = await page.request.get(desk.url);
    assert.match(served.headers()['content-security-policy'] ?? '', /default-src 'self'/);
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await context.close();
  });

  test("a message of an inbox outside the reviewer's rights: 404, and not in the queue", async () => {
    const theirs = h.newInbox('billing');
    const ref = await waiting('Invoice', 'Invoice question.', theirs);
    const { token } = await addReviewer(h.db, { name: 'Sales only', inboxes: [h.newInbox('sales')] });
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, token);
    assert.equal(await page.getByRole('row').filter({ hasText: theirs }).count(), 0);
    const answer = await page.goto(messageUrl(ref));
    assert.equal(answer?.status(), 404);
    const post = await page.request.post(`${messageUrl(ref)}/review`, { form: { verdict: 'reject', revision: '1' } });
    assert.ok([403, 404].includes(post.status()), 'no verdict on it either');
    assert.match(String(await status(ref)), /awaiting_approval|escalated/);
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await context.close();
  });
});

describe("the reviewer's page states", { skip }, () => {
  test('an edit, then the plain "Approve and send": the diff is shown and nothing is sent; approving it there sends the edit, never the original', async () => {
    const ref = await waiting('Wrong size', 'The shoes are a size too small.');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await signIn(context, desk.url, ada.token);
    await page.goto(messageUrl(ref));
    const drafted = await page.getByLabel(/Edit the reply/).inputValue();
    const edited = `${drafted}\n\nWe will send a label for the exchange today.`;
    await page.getByLabel(/Edit the reply/).fill(edited);

    const answer = page.waitForResponse((r) => r.url().endsWith('/review') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Approve and send', exact: true }).click();
    assert.equal((await answer).status(), 200);
    await page.getByText('You edited the reply, so nothing was sent yet').waitFor();
    assert.match(
      await page
        .locator('.diff ins')
        .allInnerTexts()
        .then((t) => t.join('\n')),
      /a label for the exchange/,
    );
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    await keepScreenshot(page, 'desk-edit-then-approve');
    assert.equal((await sentTo(ref)).length, 0, 'the original was not sent');
    assert.match(String(await status(ref)), /awaiting_approval|escalated/, 'still waiting');

    await page.getByRole('button', { name: 'Approve and send the edited reply' }).click();
    await page.getByText('Approved with your edit').waitFor();
    assert.equal(await finalStatus(ref), 'sent');
    const outbox = await h.sandbox.outbox({ inbox_id: ref.inboxId });
    assert.deepEqual(
      outbox.map((e) => e.message.text),
      [edited.trim()],
      'exactly one email: the edit',
    );
    await context.close();
  });

  test('the editor left as drafted: the plain approve sends the draft; the page after names the reviewer and shows the text on its way', async () => {
    const ref = await waiting('Opening hours', 'When are you open on Sunday?');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await signIn(context, desk.url, grace.token);
    await page.goto(messageUrl(ref));
    const drafted = (await page.locator('pre.draft').innerText()).trim();
    await page.getByRole('button', { name: 'Approve and send', exact: true }).click();
    await page.getByText('Approved: the reply is on its way.').waitFor();
    const verdict = await page.locator('section.verdict').innerText();
    assert.match(verdict, /Approved by Grace Hopper, on revision 1/);
    assert.doesNotMatch(verdict, /rv_/, 'a name, not an id');
    assert.doesNotMatch(await page.locator('.facts').innerText(), /awaiting approval/, 'the status as it becomes');
    assert.equal(await finalStatus(ref), 'sent');
    await page.reload(); // the verdict recorded by now, however slow the worker
    assert.equal((await page.locator('section.verdict pre.sent').innerText()).trim(), drafted);
    assert.match(await page.locator('.facts').innerText(), /Status\s+sent/);
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    await keepScreenshot(page, 'desk-after-approve');
    assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId }))[0]?.message.text, drafted);
    await context.close();
  });

  test('an edit the reply rule refuses, sent with the plain approve: refused with the reason, the text kept, nothing sent', async () => {
    const ref = await waiting('HTML please', 'Can you format it?');
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, ada.token);
    await page.goto(messageUrl(ref));
    await page.getByLabel(/Edit the reply/).fill('<b>Hello</b>');
    const answer = page.waitForResponse((r) => r.url().endsWith('/review') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Approve and send', exact: true }).click();
    assert.equal((await answer).status(), 422);
    await page.getByText('The edited reply cannot be sent: it contains HTML').waitFor();
    assert.equal(await page.getByLabel(/Edit the reply/).inputValue(), '<b>Hello</b>');
    assert.equal((await sentTo(ref)).length, 0);
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await context.close();
  });

  test('two waiting messages are told apart by subject, customer, time and conversation; filtered and sorted by them', async () => {
    const inbox = h.newInbox('told-apart');
    const first = await waiting('Broken zipper', 'The zipper broke on day one.', inbox, 'maria@customer.example');
    const second = await waiting('Address change', 'Please ship to my new address.', inbox, 'tom@customer.example');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await signIn(context, desk.url, ada.token);
    await page.goto(`${desk.url}/?inbox=${encodeURIComponent(inbox)}`);
    const rows = page.getByRole('row').filter({ hasText: inbox });
    assert.equal(await rows.count(), 2);
    const [a, b] = await rows.allInnerTexts();
    assert.notEqual(a, b, 'the rows differ');
    assert.match(a ?? '', /Broken zipper[\s\S]*maria@customer\.example[\s\S]*UTC[\s\S]*1 message/);
    assert.match(b ?? '', /Address change[\s\S]*tom@customer\.example/);
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    await keepScreenshot(page, 'desk-queue');

    await page.getByLabel('Subject or customer').fill('tom@');
    await page.getByRole('button', { name: 'Filter' }).click();
    assert.deepEqual(
      (await page.getByRole('row').filter({ hasText: inbox }).allInnerTexts()).map((t) => /Address change/.test(t)),
      [true],
    );
    await page.goto(`${desk.url}/?inbox=${encodeURIComponent(inbox)}&sort=subject`);
    const bySubject = await page.getByRole('row').filter({ hasText: inbox }).allInnerTexts();
    assert.match(bySubject[0] ?? '', /Address change/, 'A before B');
    await page.goto(`${desk.url}/?inbox=${encodeURIComponent(inbox)}&sort=newest`);
    assert.match((await page.getByRole('row').filter({ hasText: inbox }).allInnerTexts())[0] ?? '', /Address change/);
    for (const ref of [first, second]) await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await context.close();
  });

  test('a verdict Temporal does not confirm within the deadline: "not confirmed yet", never "nothing was changed"; once it stands, the page shows it', async () => {
    const ref = await waiting('Slow answer', 'Is anyone there?');
    // A desk whose Temporal client hears the Update's answer late: the real server applies the
    // verdict, then the call outlives the desk's deadline (a long poll on a task queue nobody
    // serves, inside the Update's call), so the desk meets gRPC's DEADLINE_EXCEEDED as it would
    // when Temporal is slow to answer.
    const deadlineMs = 1_500;
    const late: Client = new Client({
      connection: h.client.connection,
      namespace: testEnv.namespace,
      interceptors: {
        workflow: [
          {
            async startUpdate(input, next) {
              const output = await next(input);
              await late.connection.workflowService.pollWorkflowTaskQueue({
                namespace: testEnv.namespace,
                taskQueue: { name: `nobody-${randomUUID()}` },
                identity: 'desk-test',
              });
              return output;
            },
          },
        ],
      },
    });
    const slow = await startDesk(h, { temporal: late, temporalDeadlineMs: deadlineMs });
    try {
      const context = await browser.newContext();
      const page = await signIn(context, slow.url, ada.token);
      await page.goto(`${slow.url}/messages/${inboundWorkflowId(ref)}`);
      const answer = page.waitForResponse((r) => r.url().endsWith('/review') && r.request().method() === 'POST');
      await page.getByRole('button', { name: 'Approve and send', exact: true }).click();
      assert.equal((await answer).status(), 202);
      const notice = await page.locator('.notice').first().innerText();
      assert.match(notice, /not confirmed yet/);
      assert.match(notice, /Reload/);
      assert.doesNotMatch(await page.content(), /Nothing was changed/i);
      assert.equal(await finalStatus(ref), 'sent');
      await page.reload();
      assert.match(await page.locator('section.verdict').innerText(), /Approved by Ada Lovelace/);
      assert.equal((await h.sandbox.outbox({ inbox_id: ref.inboxId })).length, 1, 'one email');
      await context.close();
    } finally {
      await slow.app.close();
    }
  });

  test('a CSRF secret planted from elsewhere (a sibling subdomain, plain http) cannot forge a verdict: tokens are bound to the session', async () => {
    const ref = await waiting('Forged from a sibling', 'Do not approve me by a forged form.');
    // The attacker's own pair: a secret cookie and a valid token for it (from the sign-in form).
    const attacker = await browser.newContext();
    const form = await attacker.newPage();
    await form.goto(`${desk.url}/sign-in`);
    const token = await form.locator('input[name="_csrf"]').first().inputValue();
    const secret = (await attacker.cookies()).find((c) => c.name === 'desk_csrf')?.value ?? '';
    assert.ok(secret !== '' && token !== '');

    // Planted in the victim's browser, then a form posted with the attacker's token.
    const victim = await browser.newContext();
    const page = await signIn(victim, desk.url, ada.token);
    await victim.addCookies([{ name: 'desk_csrf', value: secret, url: desk.url, httpOnly: true, sameSite: 'Strict' }]);
    const forged = await page.request.post(`${messageUrl(ref)}/review`, {
      form: { verdict: 'reject', revision: '1', _csrf: token },
      maxRedirects: 0,
    });
    assert.equal(forged.status(), 403);
    assert.match(String(await status(ref)), /awaiting_approval|escalated/, 'the reply still waits');
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await Promise.all([attacker.close(), victim.close()]);
  });

  test("the message's language and attachments: named on the page, each a link to AgentMail's copy for reviewers of the inbox only", async () => {
    // Prepare: a German message with a text file attached, waiting for approval
    const inboxId = h.newInbox();
    const inbound = await h.sandbox.inbound({
      inbox_id: inboxId,
      from: `anhang-${randomUUID().slice(0, 8)}@customer.example`,
      subject: 'Bestellung',
      text: 'Hallo, meine Bestellung ist noch nicht angekommen. Die Bestellnummern stehen in der angehängten Datei.',
      attachments: [
        { filename: 'bestellungen.txt', content_type: 'text/plain', text: 'Bestellung 1234\nBestellung 5678' },
      ],
    });
    const ref = { inboxId, messageId: inbound.message.message_id };
    await eventually(
      async () => (['awaiting_approval', 'escalated'].includes(String(await status(ref))) ? true : undefined),
      'the reply to wait for a person',
    );
    // Act: a reviewer opens it; another reviewer, of another inbox only, tries the link
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, ada.token);
    await page.goto(messageUrl(ref));
    // Assess
    const facts = await page.locator('dl.facts').innerText();
    assert.match(facts, /Language\s+German \(de\)/);
    assert.match(facts, /bestellungen\.txt \(text\/plain, 1 KB, read for the draft\)/);
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    const href = await page.getByRole('link', { name: 'bestellungen.txt' }).getAttribute('href');
    const link = await page.request.get(`${desk.url}${href}`, { maxRedirects: 0 });
    assert.equal(link.status(), 302);
    const download = await fetch(link.headers().location ?? '');
    assert.equal(await download.text(), 'Bestellung 1234\nBestellung 5678', "AgentMail's copy of the file");
    const { token } = await addReviewer(h.db, { name: 'Other inbox', inboxes: [h.newInbox('other')] });
    const outsider = await browser.newContext();
    const outsiderPage = await signIn(outsider, desk.url, token);
    assert.equal((await outsiderPage.request.get(`${desk.url}${href}`, { maxRedirects: 0 })).status(), 404);
    await h.client.workflow.getHandle(inboundWorkflowId(ref)).terminate('test over');
    await Promise.all([context.close(), outsider.close()]);
  });

  test('a thread a teammate answered is listed under "Threads a person answers"; handing it back there lets the agent answer its next message', async () => {
    // Prepare: a thread whose first reply a reviewer rejects, then a teammate answers in it (AgentMail's console)
    const inboxId = h.newInbox();
    const threadId = randomUUID();
    const from = `held-${randomUUID().slice(0, 8)}@customer.example`;
    const write = async (text: string): Promise<MessageRef> => {
      const inbound = await h.sandbox.inbound({
        inbox_id: inboxId,
        thread_id: threadId,
        from,
        subject: 'Tent pole',
        text,
      });
      return { inboxId, messageId: inbound.message.message_id };
    };
    const first = await write('My tent pole snapped on the first night.');
    await eventually(
      async () => (['awaiting_approval', 'escalated'].includes(String(await status(first))) ? true : undefined),
      'the first reply to wait for a person',
    );
    await h.client.workflow
      .getHandle(inboundWorkflowId(first))
      .executeUpdate(reviewUpdate, { args: [{ verdict: 'reject', revision: 1, reviewer: grace.id }] });
    assert.equal(await finalStatus(first), 'rejected');
    await h.agentmail.inboxes.messages.reply(inboxId, first.messageId, {
      text: 'Grace here: a new pole is on its way.',
    });
    const second = await write('Thank you, Grace!');
    assert.equal(await finalStatus(second), 'skipped');

    // Act: the reviewer finds the thread on its page and hands it back
    const context = await browser.newContext();
    const page = await signIn(context, desk.url, ada.token);
    await page.getByRole('link', { name: 'Threads a person answers' }).click();
    await eventually(async () => {
      await page.reload();
      return (await page.content()).includes(threadId) ? true : undefined;
    }, 'the thread on the page (visibility catches up)');
    assert.deepEqual(seriousOrWorse(await axeViolations(page)), []);
    await keepScreenshot(page, 'desk-threads');
    const row = page.locator('tr', { hasText: threadId });
    await row.getByRole('button', { name: 'Let the agent answer this thread again' }).click();
    await page.waitForURL(`${desk.url}/threads?done=handed-back`);
    assert.match(await page.locator('.notice').first().innerText(), /Handed back/);
    assert.equal(await page.locator('tr', { hasText: threadId }).count(), 0, 'no longer listed');

    // Assess: the customer's next message is the agent's again (its reply waits for approval in this inbox)
    const third = await write('One more question: do you sell spare pegs?');
    await eventually(
      async () => (['awaiting_approval', 'escalated'].includes(String(await status(third))) ? true : undefined),
      'the next message answered by the agent again',
    );
    await h.client.workflow.getHandle(inboundWorkflowId(third)).terminate('test over');
    await context.close();
  });
});

describe('the desk without a browser', { skip }, () => {
  test('requests are logged at debug: a stylesheet or a favicon 404 writes no info line', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const quiet = await startDesk(h, { logger });
    lines.length = 0; // Fastify's own "Server listening" line
    try {
      assert.equal((await quiet.app.inject({ method: 'GET', url: '/desk.css' })).statusCode, 200);
      assert.equal((await quiet.app.inject({ method: 'GET', url: '/favicon.ico' })).statusCode, 303);
      assert.equal((await quiet.app.inject({ method: 'GET', url: '/sign-in' })).statusCode, 200);
      assert.deepEqual(lines, []);
      logger.level = 'debug';
      await quiet.app.inject({ method: 'GET', url: '/desk.css' });
      assert.match(lines.join(''), /"msg":"desk request"/);
    } finally {
      await quiet.app.close();
    }
  });

  test('behind TLS (DESK_PUBLIC_URL https, or a trusted proxy saying https) every cookie is Secure; sign-in attempts are rate-limited', async () => {
    const tls = await startDesk(h, { publicUrl: 'https://desk.example.com', signInAttemptsPerMinute: 3 });
    try {
      const form = await tls.app.inject({ method: 'GET', url: '/sign-in' });
      const cookies = [form.headers['set-cookie']].flat().join('\n');
      assert.match(cookies, /__Host-desk_csrf=.*Secure/, 'behind TLS the cookie is __Host- (no sibling can set it)');
      assert.match(cookies, /HttpOnly/);
      assert.match(cookies, /SameSite=Strict/);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1] ?? '';
      const secret = /__Host-desk_csrf=([^;]+)/.exec(cookies)?.[1] ?? '';
      const attempts = [];
      for (let i = 0; i < 5; i += 1) {
        attempts.push(
          (
            await tls.app.inject({
              method: 'POST',
              url: '/sign-in',
              headers: { cookie: `__Host-desk_csrf=${secret}`, 'content-type': 'application/x-www-form-urlencoded' },
              payload: `_csrf=${encodeURIComponent(csrf)}&token=rvw_${'x'.repeat(43)}`,
            })
          ).statusCode,
        );
      }
      assert.deepEqual(attempts, [401, 401, 401, 429, 429]);
    } finally {
      await tls.app.close();
    }
    // Plain http by a name that is not loopback (a neighbour on the LAN, a sibling subdomain): refused.
    const lan = await desk.app.inject({ method: 'GET', url: '/sign-in', headers: { host: 'desk.example.com' } });
    assert.equal(lan.statusCode, 403);
    assert.match(lan.body, /https only/);
    assert.equal(lan.headers['set-cookie'], undefined, 'no cookie is handed out');
    for (const host of ['127.0.0.1:3300', 'localhost', '[::1]:3300'])
      assert.equal(
        (await desk.app.inject({ method: 'GET', url: '/sign-in', headers: { host } })).statusCode,
        200,
        host,
      );
    // Behind a trusted TLS-terminating proxy on plain http: Secure when the proxy says https, not otherwise.
    const proxied = await startDesk(h, { trustProxy: true });
    try {
      const viaTls = await proxied.app.inject({
        method: 'GET',
        url: '/sign-in',
        headers: { 'x-forwarded-proto': 'https', host: 'desk.example.com' },
      });
      assert.equal(viaTls.statusCode, 200, 'https through the proxy is served');
      assert.match([viaTls.headers['set-cookie']].flat().join('\n'), /desk_csrf=.*Secure/);
      const plain = await proxied.app.inject({ method: 'GET', url: '/sign-in' });
      assert.doesNotMatch([plain.headers['set-cookie']].flat().join('\n'), /Secure/);
    } finally {
      await proxied.app.close();
    }
  });
});

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { inboundWorkflowId } from '../lib/hashing';
import { testEnv } from './support/env';
import { Harness } from './support/harness';
import { CHROMIUM, findInWorkflowList, keepScreenshot, launchChromium, openWorkflowList } from './support/web-ui';

// The operator's path, as a person would take it: headless Chromium opens the dev server's Web
// UI, filters by MessageId and ReplyStatus, and finds the message's workflow. A screenshot is
// kept as a test artifact.
const uiUrl = process.env.TEMPORAL_UI_URL;
const skip = !uiUrl
  ? 'the suite runs against a Temporal server without a Web UI of its own (TEMPORAL_ADDRESS was set)'
  : !existsSync(CHROMIUM)
    ? `Chromium is not installed at ${CHROMIUM} (scripts/setup.sh installs Debian's chromium package; set CHROMIUM_PATH to use another)`
    : false;

let h: Harness;
let browser: Browser;
before(async () => {
  if (skip) return;
  h = await Harness.start();
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await h?.close();
});

test('an operator finds a message in the Web UI by MessageId and sees its ReplyStatus', { skip }, async () => {
  const inboxId = h.newInbox();
  const inbound = await h.sandbox.inbound({
    inbox_id: inboxId,
    from: `ui-${randomUUID().slice(0, 8)}@customer.example`,
    subject: 'Find me',
    text: 'In the Web UI.',
  });
  const ref = { inboxId, messageId: inbound.message.message_id };
  assert.equal((await h.resultOf(ref)).status, 'sent');
  const workflowId = inboundWorkflowId(ref);

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const query = `MessageId = "${ref.messageId}" AND ReplyStatus = "sent"`;
  const row = await findInWorkflowList(page, {
    uiUrl: uiUrl as string,
    namespace: testEnv.namespace,
    query,
    workflowId,
  });
  await keepScreenshot(page, 'web-ui-message-search');
  assert.ok(await row.isVisible(), `the workflow ${workflowId} is listed for ${query}`);

  // The same filter with another status finds nothing: the status shown is the real one.
  await openWorkflowList(
    page,
    uiUrl as string,
    testEnv.namespace,
    `MessageId = "${ref.messageId}" AND ReplyStatus = "failed"`,
  );
  await page.getByText(/^0 Workflows$/).waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await page.getByText(workflowId).count(), 0);
  await page.close();
});

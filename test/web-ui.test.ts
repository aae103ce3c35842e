import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { inboundWorkflowId } from '../lib/hashing';
import { testEnv } from './support/env';
import { Harness } from './support/harness';

// The operator's path, as a person would take it: headless Chromium (Debian's package, driven by
// playwright-core; no browser download) opens the dev server's Web UI, filters by MessageId and
// ReplyStatus, and finds the message's workflow. A screenshot is kept as a test artifact.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.resolve(__dirname, '..', 'test-artifacts');
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
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
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
  await page.goto(`${uiUrl}/namespaces/${testEnv.namespace}/workflows?query=${encodeURIComponent(query)}`, {
    waitUntil: 'networkidle',
  });
  // Visibility is eventually consistent: the list may need a reload or two.
  const row = page.getByText(workflowId).first();
  for (let attempt = 0; attempt < 10; attempt += 1) {
    try {
      await row.waitFor({ state: 'visible', timeout: 3_000 });
      break;
    } catch {
      await page.reload({ waitUntil: 'networkidle' });
    }
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, 'web-ui-message-search.png'), fullPage: true });
  assert.ok(await row.isVisible(), `the workflow ${workflowId} is listed for ${query}`);

  // The same filter with another status finds nothing: the status shown is the real one.
  await page.goto(
    `${uiUrl}/namespaces/${testEnv.namespace}/workflows?query=${encodeURIComponent(`MessageId = "${ref.messageId}" AND ReplyStatus = "failed"`)}`,
    { waitUntil: 'networkidle' },
  );
  await page.getByText(/^0 Workflows$/).waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await page.getByText(workflowId).count(), 0);
  await page.close();
});

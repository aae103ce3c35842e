import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';

/**
 * The operator's path through Temporal's Web UI, as a person takes it: headless Chromium
 * (Debian's package, driven by playwright-core; no browser download) opens the workflow list
 * with a visibility query and looks for a workflow ID in it.
 */

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.resolve(__dirname, '..', '..', 'test-artifacts');

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
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
}

/** The UI's workflow list for `query` in `namespace`. */
export async function openWorkflowList(page: Page, uiUrl: string, namespace: string, query: string): Promise<void> {
  await page.goto(`${uiUrl}/namespaces/${namespace}/workflows?query=${encodeURIComponent(query)}`, {
    waitUntil: 'networkidle',
  });
}

/**
 * Opens the list for `query` and waits for `workflowId` in it, reloading meanwhile: visibility
 * is eventually consistent, so a just-finished workflow may need a reload or two. Returns its
 * row, listed or not (the caller asserts).
 */
export async function findInWorkflowList(
  page: Page,
  list: { uiUrl: string; namespace: string; query: string; workflowId: string },
): Promise<Locator> {
  await openWorkflowList(page, list.uiUrl, list.namespace, list.query);
  const row = page.getByText(list.workflowId).first();
  for (let attempt = 0; attempt < 10; attempt += 1) {
    try {
      await row.waitFor({ state: 'visible', timeout: 3_000 });
      break;
    } catch {
      await page.reload({ waitUntil: 'networkidle' });
    }
  }
  return row;
}

/** A full-page screenshot kept under test-artifacts/, for a person to look at after the run. */
export async function keepScreenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

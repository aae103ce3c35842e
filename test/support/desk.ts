import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { BrowserContext, Page } from 'playwright-core';
import { buildDesk, type DeskOptions } from '../../desk/app';
import { createLogger } from '../../lib/logger';
import type { Harness } from './harness';

/** The review desk on a loopback port, over the harness's Temporal, Postgres and sandbox. */
export async function startDesk(h: Harness, options: Partial<DeskOptions> = {}) {
  const app = buildDesk({
    db: h.db,
    temporal: h.client,
    agentmail: h.agentmail,
    logger: createLogger('test-desk', process.env.TEST_LOG_LEVEL ?? 'silent'),
    sessionTtlMs: 60 * 60 * 1000,
    publicUrl: 'http://127.0.0.1',
    trustProxy: false,
    signInAttemptsPerMinute: 50,
    ...options,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}` };
}

/** Signs in through the form, as a person does; returns on the queue page. */
export async function signIn(context: BrowserContext, deskUrl: string, token: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${deskUrl}/sign-in`);
  await page.getByLabel('Your reviewer token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${deskUrl}/`);
  return page;
}

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: number;
}

/**
 * axe-core's WCAG 2 A/AA checks on the page as it is. Evaluated over the DevTools protocol, which
 * the page's Content-Security-Policy does not govern, so the desk's CSP stays as it is served.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<AxeResults> } })
      .axe;
    interface AxeResults {
      violations: Array<{ id: string; impact: string | null; help: string; nodes: unknown[] }>;
    }
    const results = await axe.run((globalThis as unknown as { document: unknown }).document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa'] },
    });
    return results.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
}

export const seriousOrWorse = (violations: AxeViolation[]) =>
  violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');

import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, expect } from 'vitest';
import { createConsoleService, type ConsoleService } from '../../src/console/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/process/logger.js';
import { inject } from 'vitest';
import type { GenerationStack } from './stack.js';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
export const chromiumPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

export interface ConsoleHarness {
  service: ConsoleService;
  url: string;
  browser: Browser;
  /** A fresh browser context (cookie jar) with a page in it. */
  newPage(): Promise<{ context: BrowserContext; page: Page }>;
}

/**
 * The console process's service on the stack's database, worker queue and storage, listening on a
 * free port, and one headless Chromium for the file (unless `browser: false`, for files that speak
 * plain HTTP). Call inside describe() after useGenerationStack; `env` changes the console's settings
 * (for example the retention its generations start with).
 */
export function useConsole(
  stack: Pick<GenerationStack, 'db'> & { worker: Pick<GenerationStack['worker'], 'apiEnv'> },
  env: Record<string, string> = {},
  options: { browser?: boolean } = {},
): ConsoleHarness {
  const harness = {} as ConsoleHarness;
  beforeAll(async () => {
    const port = await freePort();
    harness.url = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      DATABASE_URL: stack.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      RATE_LIMIT_PER_MINUTE: '1000000',
      CONSOLE_PORT: String(port),
      ...stack.worker.apiEnv,
      ...env,
    });
    harness.service = await createConsoleService(config, createLogger('console-test', 'silent'));
    await harness.service.app.listen({ host: '127.0.0.1', port });
    if (options.browser === false) return;
    if (!chromiumPath) throw new Error('Chromium is missing: apt-get install chromium');
    harness.browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    harness.newPage = async () => {
      const context = await harness.browser.newContext({ baseURL: harness.url, acceptDownloads: true });
      const page = await context.newPage();
      page.on('dialog', (dialog) => void dialog.accept());
      return { context, page };
    };
  });
  afterAll(async () => {
    await harness.browser?.close();
    await harness.service?.close();
  });
  return harness;
}

/** Signs in by pasting the key, as a person would. */
export async function signIn(page: Page, key: string): Promise<void> {
  await page.goto('/sign-in');
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname === '/');
}

/**
 * Clicks the playground's Generate, follows it to the generation's page and waits there until the
 * page, updating itself, shows `succeeded`; the generation's id.
 */
export async function generateAndWait(page: Page, timeoutMs = 30_000): Promise<string> {
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.waitForURL(/\/generations\/gen_/);
  const generationId = new URL(page.url()).pathname.split('/').pop()!;
  // The page's script shows the new status, then reloads: wait for the reloaded page, whole (no
  // longer live, loaded, showing succeeded), in one look at one document. Read apart, a count of
  // the live marker could fall between the two documents, and the next navigation meet the reload.
  await expect
    .poll(
      () =>
        page.evaluate<string | undefined>(`
          document.readyState === 'complete' && !document.querySelector('[data-live-status]')
            ? document.querySelector('[data-status]')?.textContent
            : 'loading'`),
      { timeout: timeoutMs },
    )
    .toBe('succeeded');
  return generationId;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string;
  nodes: Array<{ target: unknown }>;
}

/**
 * axe-core run in the page: no serious or critical violations. Its source is evaluated through the
 * DevTools protocol, which the page's CSP (no inline script) does not apply to.
 */
export async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate<AxeViolation[]>(`
    axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => ({ target: n.target })) })))`);
  expect(violations, `axe on ${page.url()}`).toEqual([]);
}

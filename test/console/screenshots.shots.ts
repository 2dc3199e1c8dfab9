import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';
import { signIn, useConsole } from '../support/console.js';
import { registeredAppAuthorization } from '../support/oauth.js';
import { batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';

/** Screenshots of each console page for docs/console.md, on the real stack with a few generations and batches. */
describe('console screenshots', () => {
  // Batches wired in the worker, two of a batch's lines in flight at once (its progress shows).
  const stack = useBatchStack({
    account: { subscription: 200, oneTime: 800 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '2' },
  });
  const consoleUi = useConsole(stack);

  it('saves one PNG per page under docs/console/', async () => {
    const out = path.join(projectRoot, 'docs', 'console');
    await mkdir(out, { recursive: true });
    const { context, page } = await consoleUi.newPage();
    await page.setViewportSize({ width: 1280, height: 860 });
    const shot = (name: string) => page.screenshot({ path: path.join(out, `${name}.png`), fullPage: false });
    await page.goto('/sign-in');
    await shot('sign-in');
    await signIn(page, stack.account.key);
    let last = '';
    for (const prompt of ['a lighthouse at dusk', 'a red fox in snow', 'city lights from above']) {
      await page.goto('/playground?model=lumen-lite');
      await page.getByLabel('Prompt').fill(prompt);
      await page.getByRole('button', { name: 'Generate' }).click();
      await page.waitForURL(/\/generations\/gen_/);
      await expect
        .poll(() => page.locator('[data-status]').textContent(), { timeout: 30_000 })
        .toBe('succeeded');
      last = page.url();
    }
    await page.goto('/playground?model=lumen-lite');
    await shot('playground');
    await page.goto(last);
    await shot('generation');
    await page.goto('/');
    await shot('overview');
    await page.goto('/gallery');
    await page.waitForFunction('[...document.images].every((i) => i.complete && i.naturalWidth > 0)');
    await shot('gallery');
    await page.locator('[data-gallery-item] img').first().click();
    await page.waitForFunction('[...document.images].every((i) => i.complete && i.naturalWidth > 0)');
    await shot('gallery-image');
    await page.goto('/generations');
    await shot('generations');
    await page.goto('/keys');
    await shot('keys');
    await page.goto('/requests');
    await shot('request-log');
    // Batches: one ended, one under way (its first lines done, the rest slow or not started yet).
    const { api, account } = stack;
    const done = await postBatch(api, account.key, { requests: batchLines(4) }, 'shots-catalog');
    await waitForBatch(api, account.key, done.json().id);
    const running = await postBatch(
      api,
      account.key,
      {
        requests: batchLines(12, (i) => (i < 5 ? `catalog item ${i}` : `catalog item ${i} [sim:slow=60]`)),
        metadata: { run: 'catalog' },
      },
      'shots-running',
    );
    const id: string = running.json().id;
    await waitForBatch(
      api,
      account.key,
      id,
      (b) => b.request_counts.succeeded >= 5 && b.request_counts.queued === 2,
    );
    await page.goto('/batches');
    await shot('batches');
    await page.goto(`/batches/${id}`);
    await shot('batch');
    await api.app.inject({
      method: 'POST',
      url: `/v1/batches/${id}/cancel`,
      headers: { authorization: `Bearer ${account.key}` },
    });
    // A chat app connecting (OAuth for the MCP endpoint): the consent page, then Connected apps.
    const { authorizationUrl } = await registeredAppAuthorization(consoleUi.url, null, {
      name: 'Example Chat',
      redirectUri: 'https://chat.example/callback',
    });
    await page.route('https://chat.example/**', (route) =>
      route.fulfill({ contentType: 'text/plain', body: 'ok' }),
    );
    await page.goto(authorizationUrl);
    await page.waitForURL('**/oauth/interaction/**');
    await shot('consent');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL('https://chat.example/**');
    await page.goto('/apps');
    await shot('connected-apps');
    await context.close();
  });
});

import { sql } from 'slonik';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { bearer } from '../support/api.js';
import { expectAccessible, generateAndWait, signIn, useConsole } from '../support/console.js';
import { registeredAppAuthorization } from '../support/oauth.js';
import { useGenerationStack } from '../support/stack.js';
import { thumbnailsWorkflow } from '../../src/workflows/thumbnails-workflow.js';

describe('console pages in Chromium against the real stack', () => {
  const stack = useGenerationStack({ account: { subscription: 50, oneTime: 950 } });
  const consoleUi = useConsole(stack);

  it('serves its stylesheet and script from src/console/static, and nothing outside it', async () => {
    const css = await fetch(`${consoleUi.url}/static/console.css`);
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(css.headers.get('cache-control')).toBe('public, max-age=300');
    expect(await css.text()).toContain('{');
    const script = await fetch(`${consoleUi.url}/static/console.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    // A path that climbs out of the folder gets an error page (404 or @fastify/static's 403), never the file.
    for (const escape of ['/static/..%2Fapp.ts', '/static/x/..%2F..%2Fapp.ts', '/static//..%2Fapp.ts']) {
      const response = await fetch(`${consoleUi.url}${escape}`);
      expect([403, 404], escape).toContain(response.status);
      expect(await response.text(), escape).not.toContain('buildConsoleApp');
    }
  });

  it('overview, keys, playground, generation, gallery, request log, sign-out', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);

    // Overview: the balance is GET /v1/credits's.
    const credits = (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json();
    await expect
      .poll(() => page.locator('[data-balance]').getAttribute('data-balance'))
      .toBe(String(credits.credits));
    expect(await page.locator('svg.chart').count()).toBe(2);
    await expectAccessible(page);

    // Keys: create one, see it once, revoke it.
    await page.getByRole('link', { name: 'API keys' }).click();
    await expectAccessible(page);
    await page.getByLabel('Name').fill('from the console');
    await page.getByRole('button', { name: 'Create key' }).click();
    const newKey = (await page.locator('[data-new-key]').textContent())!;
    expect(newKey).toMatch(/^gsk_live_[A-Za-z0-9]{32}$/);
    const works = await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(newKey) });
    expect(works.statusCode).toBe(200);
    await page.goto('/keys');
    expect(await page.content()).not.toContain(newKey);
    // The webhook signing secret: the one the API shows (and signs with).
    const secret = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/webhooks/secret',
      headers: bearer(newKey),
    });
    expect(await page.locator('[data-webhook-secret]').textContent()).toBe(secret.json().secret);
    await page.getByRole('button', { name: /Revoke from the console/ }).click();
    await page.waitForURL('**/keys');
    const refused = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/credits',
      headers: bearer(newKey),
    });
    expect(refused.statusCode).toBe(401);

    // Playground: the price shown is the API's quote; the form is sent twice; one debit.
    await page.getByRole('link', { name: 'Playground' }).click();
    await page.getByLabel('Model', { exact: true }).selectOption('lumen-lite');
    await page.waitForURL('**/playground?model=lumen-lite');
    await expectAccessible(page);
    const models = (
      await stack.api.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(stack.account.key) })
    ).json();
    const lite = models.data.find((m: { id: string }) => m.id === 'lumen-lite');
    expect(Number(await page.locator('[data-price]').textContent())).toBe(lite.default_price);
    await page.getByLabel('Prompt').fill('a lighthouse at dusk');
    // Two submissions of one rendered form (a double click that got through), then the real click.
    const sent = await page.evaluate(`(async () => {
      const form = document.querySelector('form[data-playground]');
      const send = () => fetch(form.action, { method: 'POST', body: new FormData(form), redirect: 'manual' });
      const answers = await Promise.all([send(), send()]);
      return answers.map((a) => a.type);
    })()`);
    expect(sent).toEqual(['opaqueredirect', 'opaqueredirect']);
    // The page follows the generation live until it shows succeeded.
    const generationId = await generateAndWait(page);
    await expectAccessible(page);
    const debits = await stack.db.pool.oneFirst(sql.unsafe`
      SELECT count(*) FROM credit_ledger WHERE account_id = ${stack.account.accountId} AND kind = 'debit'`);
    expect(debits).toBe(1);
    const generations = await stack.db.pool.oneFirst(sql.unsafe`
      SELECT count(*) FROM generations WHERE account_id = ${stack.account.accountId}`);
    expect(generations).toBe(1);
    const after = (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json();
    expect(after.credits).toBe(credits.credits - lite.default_price);
    expect(after.subscription_credits).toBe(Math.max(0, 50 - lite.default_price)); // subscription first

    // Gallery: until the thumbnails schedule's sweep has made its thumbnail the tile shows the image
    // itself; then the thumbnail is loaded, decoded and about 400 px; the full image downloads.
    await page.getByRole('link', { name: 'Gallery' }).click();
    const tile = page.locator(`[data-gallery-item="${generationId}"] img`);
    expect(await tile.getAttribute('src')).not.toMatch(/-thumb\.webp$/);
    await stack.client.workflow.execute(thumbnailsWorkflow, {
      workflowId: `thumbnails-${generationId}`,
      taskQueue: stack.worker.taskQueue,
      args: [{ batchSize: 50, maxBatches: 20 }],
    });
    await expect
      .poll(async () => {
        const src = await tile.getAttribute('src');
        if (!src?.endsWith('-thumb.webp')) await page.reload();
        return src;
      })
      .toMatch(/-thumb\.webp$/);
    await expect
      .poll(() =>
        tile.evaluate((img: { complete: boolean; naturalWidth: number }) => img.complete && img.naturalWidth),
      )
      .toBeGreaterThan(0);
    const natural = await tile.evaluate((img: { naturalWidth: number; naturalHeight: number }) => [
      img.naturalWidth,
      img.naturalHeight,
    ]);
    expect(Math.max(...natural)).toBe(400);
    expect(await tile.getAttribute('src')).toMatch(/-thumb\.webp$/);
    await expectAccessible(page);
    await tile.click();
    await expect.poll(() => page.locator('dd.prompt').textContent()).toBe('a lighthouse at dusk');
    await expectAccessible(page);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.locator('[data-download]').click(),
    ]);
    const file = await download.path();
    const meta = await sharp(file).metadata();
    expect(meta.width).toBeGreaterThan(400);
    expect(download.suggestedFilename()).toMatch(new RegExp(`^${generationId}\\.(png|jpg|webp)$`));

    // Generations list and the request log (the playground's request is in it).
    await page.getByRole('link', { name: 'Generations' }).click();
    expect(await page.getByRole('link', { name: generationId }).count()).toBe(1);
    await expectAccessible(page);
    await page.getByRole('link', { name: 'Request log' }).click();
    await expect.poll(() => page.getByText(generationId).count()).toBeGreaterThan(0);
    await expectAccessible(page);

    // Sign out: the session is gone, pages send you to sign-in.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/sign-in**');
    await page.goto('/');
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    await context.close();
  }, 120_000);

  it('an app connecting: sign-in, the consent page, approve, Connected apps, revoke', async () => {
    const { context, page } = await consoleUi.newPage();
    // No resource named: the MCP URL is the default (and only) one.
    const { authorizationUrl } = await registeredAppAuthorization(consoleUi.url, null, {
      name: 'Example Chat',
      redirectUri: 'https://chat.example/callback',
    });
    let returned = '';
    await page.route('https://chat.example/**', async (route) => {
      returned = route.request().url();
      await route.fulfill({ contentType: 'text/plain', body: 'back in the app' });
    });
    // Not signed in: the sign-in page, then back to the consent page.
    await page.goto(authorizationUrl);
    await page.waitForURL('**/sign-in?next=**');
    await expectAccessible(page);
    await page.getByLabel('API key').fill(stack.account.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/oauth/interaction/**');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Connect Example Chat?');
    await expectAccessible(page);
    // The app's limits: 100 credits a day unless changed here; changed to 40 a week.
    expect(await page.locator('#app-spend-limit').inputValue()).toBe('100');
    expect(await page.locator('#app-reset').inputValue()).toBe('daily');
    await page.locator('#app-spend-limit').fill('40');
    await page.locator('#app-reset').selectOption('weekly');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL('https://chat.example/**');
    expect(returned).toMatch(/^https:\/\/chat\.example\/callback\?code=/);
    await page.goto('/apps');
    await expectAccessible(page);
    expect(await page.locator('[data-grant-id]').count()).toBe(1);
    expect(await page.locator('[data-grant-id] [data-limit-words]').textContent()).toContain(
      '0 of 40 credits this week',
    );
    await page.getByRole('button', { name: 'Revoke Example Chat' }).click();
    await expect.poll(() => page.getByText(/^revoked /).count()).toBe(1);
    await context.close();
  });
});

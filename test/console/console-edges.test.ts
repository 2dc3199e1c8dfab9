import { sql } from 'slonik';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { bearer } from '../support/api.js';
import { expectAccessible, generateAndWait, signIn, useConsole } from '../support/console.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * The console's edges in Chromium against the real stack: forms that must act once, a provider
 * that is down, reference images sent as files, content that expired (on the workflow's own
 * timer: the console starts its generations with a 20 s retention here), and its health routes.
 */
describe('console edges in Chromium against the real stack', () => {
  const stack = useGenerationStack({ account: { oneTime: 1000 } });
  const consoleUi = useConsole(stack, { RESULT_RETENTION_MS: '20000' });
  const count = async (query: ReturnType<typeof sql.unsafe>) => Number(await stack.db.pool.oneFirst(query));
  const debits = () =>
    count(sql.unsafe`SELECT count(*) FROM credit_ledger
                     WHERE account_id = ${stack.account.accountId} AND kind = 'debit'`);

  it('answers /healthz and /readyz without a session', async () => {
    const alive = await fetch(`${consoleUi.url}/healthz`);
    expect(alive.status).toBe(200);
    expect(await alive.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${consoleUi.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } });
  });

  it('creates one key per rendered form: a double click or a resent form creates nothing more', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto('/keys');
    await page.getByLabel('Name').fill('sent twice');
    // The same rendered form sent twice at once (a double click), then once more (a reload of the answer).
    const statuses = await page.evaluate(`(async () => {
      const form = document.querySelector('form[action="/keys"]');
      const send = () => fetch('/keys', { method: 'POST', body: new URLSearchParams(new FormData(form)) });
      const both = await Promise.all([send(), send()]);
      const again = await send();
      return { both: both.map((a) => a.status).sort(), again: again.status, text: await again.text() };
    })()`);
    const sent = statuses as { both: number[]; again: number; text: string };
    expect(sent.both).toEqual([201, 409]);
    expect(sent.again).toBe(409);
    expect(sent.text).toContain('This form was already sent: it created the key gsk_live_');
    expect(sent.text).toContain('named “sent twice”');
    expect(sent.text).not.toMatch(/gsk_live_[A-Za-z0-9]{32}/); // the secret is never shown again
    expect(
      await count(sql.unsafe`SELECT count(*) FROM api_keys
                             WHERE account_id = ${stack.account.accountId} AND name = 'sent twice'`),
    ).toBe(1);
    // A fresh page is a fresh form: it creates the next key.
    await page.goto('/keys');
    await page.getByLabel('Name').fill('second');
    await page.getByRole('button', { name: 'Create key' }).click();
    expect(await page.locator('[data-new-key]').textContent()).toMatch(/^gsk_live_[A-Za-z0-9]{32}$/);
    await expectAccessible(page);
    // A form id that is not one the page made is refused, and creates nothing.
    const csrf = await page.locator('form[action="/keys"] input[name="_csrf"]').inputValue();
    const forged = await page.request.post('/keys', { form: { _csrf: csrf, name: 'no form id' } });
    expect(forged.status()).toBe(400);
    expect(
      await count(sql.unsafe`SELECT count(*) FROM api_keys
                             WHERE account_id = ${stack.account.accountId} AND name = 'no form id'`),
    ).toBe(0);
    await context.close();
  });

  it('sends reference images chosen as files through the API admission path', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto('/playground?model=lumen-pro');
    const before = await debits();
    // A file that is not an image is refused in words, before anything is charged.
    await page.getByLabel('Prompt').fill('not an image');
    await page
      .getByLabel(/Reference images/)
      .setInputFiles({ name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('plain text') });
    await page.getByRole('button', { name: 'Generate' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('images');
    expect(await debits()).toBe(before);

    const png = await sharp({
      create: { width: 96, height: 64, channels: 3, background: { r: 200, g: 40, b: 40 } },
    })
      .png()
      .toBuffer();
    await page.getByLabel('Prompt').fill('in the style of the reference');
    await page.getByLabel(/Reference images/).setInputFiles([
      { name: 'a.png', mimeType: 'image/png', buffer: png },
      { name: 'b.png', mimeType: 'image/png', buffer: png },
    ]);
    // The page follows the generation live until it shows succeeded.
    const generationId = await generateAndWait(page);
    expect(await debits()).toBe(before + 1);
    // The API stored both files and the generation names our copies, as for a data URI sent to /v1.
    const images = (await stack.db.pool.oneFirst(sql.unsafe`
      SELECT input->'images' FROM generations WHERE id = ${generationId}`)) as string[];
    expect(images).toHaveLength(2);
    for (const url of images) {
      const stored = await fetch(url);
      expect(stored.status).toBe(200);
      expect(Buffer.from(await stored.arrayBuffer()).equals(png)).toBe(true);
    }
    await context.close();
  }, 60_000);

  it('shows content that expired as expired: out of the gallery, no image, no download', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto('/playground?model=lumen-lite');
    await page.getByLabel('Prompt').fill('kept for twenty seconds');
    // The page follows the generation live until it shows succeeded.
    const generationId = await generateAndWait(page);
    await page.goto('/gallery');
    const tile = page.locator(`[data-gallery-item="${generationId}"]`);
    const imagePath = (await tile.getAttribute('href'))!;
    const resultUrl = (await stack.db.pool.oneFirst(sql.unsafe`
      SELECT output->'images'->0->>'url' FROM generations WHERE id = ${generationId}`)) as string;

    // The workflow's own timer expires the content (20 s after it was stored).
    await expect
      .poll(
        () =>
          stack.db.pool.oneFirst(
            sql.unsafe`SELECT content_expired FROM generations WHERE id = ${generationId}`,
          ),
        { timeout: 60_000, interval: 1_000 },
      )
      .toBe(true);
    expect((await fetch(resultUrl)).status).toBe(404);
    await page.goto('/gallery');
    expect(await page.locator(`[data-gallery-item="${generationId}"]`).count()).toBe(0);
    const opened = await page.goto(imagePath);
    expect(opened!.status()).toBe(404);
    expect(await page.getByRole('heading', { name: 'Not available' }).count()).toBe(1);
    expect(await page.textContent('body')).toContain('its content has expired');
    await expectAccessible(page);
    const download = await page.request.get(`${imagePath}/download`);
    expect(download.status()).toBe(404);
    expect(download.headers()['content-disposition']).toBeUndefined();
    await page.goto(`/generations/${generationId}`);
    expect(await page.textContent('body')).toContain('The content of this generation has expired');
    expect(await page.locator('main img, main video').count()).toBe(0);
    await expectAccessible(page);
    await context.close();
  }, 120_000);

  it('refuses a new playground generation while its provider is down, as the API does', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto('/playground?model=lumen-lite');
    await page.getByLabel('Prompt').fill('sent before the outage');
    const form = async () =>
      Object.fromEntries(
        await page
          .locator('form[data-playground] input[type="hidden"], form[data-playground] textarea')
          .evaluateAll((els) =>
            els.map((e) => [
              (e as unknown as { name: string }).name,
              (e as unknown as { value: string }).value,
            ]),
          ),
      ) as Record<string, string>;
    const accepted = await form();
    const first = await page.request.post('/playground', { multipart: accepted, maxRedirects: 0 });
    expect(first.status()).toBe(303);
    const acceptedAt = first.headers()['location'];

    await stack.db.pool.query(sql.unsafe`
      INSERT INTO provider_health (provider, state, consecutive_failures, last_error, last_failure_at, down_since, probe_at)
      VALUES ('simulated', 'down', 5, 'test outage', now(), now(), now() + interval '1 hour')
      ON CONFLICT (provider) DO UPDATE SET state = 'down', probe_at = now() + interval '1 hour', down_since = now()`);
    try {
      const before = await debits();
      await page.reload();
      await page.getByLabel('Prompt').fill('sent while down');
      // The console hears of the outage from PostgreSQL's notification.
      await expect
        .poll(async () => {
          const answer = await page.request.post('/playground', { multipart: await form(), maxRedirects: 0 });
          return answer.status();
        })
        .toBe(503);
      const refused = await page.request.post('/playground', { multipart: await form(), maxRedirects: 0 });
      expect(refused.status()).toBe(503);
      expect(Number(refused.headers()['retry-after'])).toBeGreaterThan(3000);
      expect(await refused.text()).toContain(
        'is unavailable, so no new generation was started. Nothing was charged',
      );
      expect(await debits()).toBe(before);
      // The form that was accepted before the outage, sent again: its generation, not a refusal.
      const resent = await page.request.post('/playground', { multipart: accepted, maxRedirects: 0 });
      expect(resent.status()).toBe(303);
      expect(resent.headers()['location']).toBe(acceptedAt);
      expect(await debits()).toBe(before);
      // The refusal is in the account's request log, as the API's would be.
      await expect
        .poll(() =>
          count(sql.unsafe`SELECT count(*) FROM api_request_log
                           WHERE account_id = ${stack.account.accountId} AND status_code = 503
                             AND error_code = 'service_unavailable' AND user_agent = 'account console'`),
        )
        .toBeGreaterThan(0);
      const viaApi = () =>
        stack.api.app.inject({
          method: 'POST',
          url: '/v1/generations',
          headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
          payload: { model: 'lumen-lite', prompt: 'the API refuses alike' },
        });
      await expect.poll(async () => (await viaApi()).statusCode).toBe(503);
    } finally {
      await stack.db.pool.query(sql.unsafe`
        UPDATE provider_health SET state = 'up', consecutive_failures = 0, down_since = NULL, probe_at = NULL
        WHERE provider = 'simulated'`);
    }
    await context.close();
  }, 60_000);
});

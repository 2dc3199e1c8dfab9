import { describe, expect, it } from 'vitest';
import { batchCharges, batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { expectAccessible, signIn, useConsole } from '../support/console.js';

describe('the console batches pages in Chromium against the real stack', () => {
  const stack = useBatchStack({
    worker: { simDelayMs: 20 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '2' },
    account: { oneTime: 10_000 },
  });
  const consoleUi = useConsole(stack);

  it('lists batches with progress and counts; a batch page filters its lines, links generations, gives the results file', async () => {
    const { api, account } = stack;
    const created = await postBatch(api, account.key, { requests: batchLines(4) });
    expect(created.statusCode, created.body).toBe(201);
    const id: string = created.json().id;
    await waitForBatch(api, account.key, id);

    const { context, page } = await consoleUi.newPage();
    await signIn(page, account.key);
    await page.getByRole('link', { name: 'Batches' }).click();
    await page.waitForURL('**/batches');
    const row = page.locator(`[data-batch-id="${id}"]`);
    expect(await row.locator('progress').getAttribute('value')).toBe('4');
    expect(await row.textContent()).toContain('succeeded 4');
    await expectAccessible(page);

    await row.getByRole('link', { name: id }).click();
    await page.waitForURL(`**/batches/${id}`);
    expect(await page.locator('[data-batch-status]').textContent()).toBe('completed');
    expect(await page.locator('[data-line]').count()).toBe(4);
    expect(await page.getByRole('button', { name: 'Cancel batch' }).count()).toBe(0); // ended
    await expectAccessible(page);

    // Filtered by status: none failed; every line succeeded, each linked to its generation's page.
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=failed/);
    expect(await page.locator('[data-line]').count()).toBe(0);
    await page.getByLabel('Status').selectOption('succeeded');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=succeeded/);
    expect(await page.locator('[data-line]').count()).toBe(4);
    const generationId = (await page.locator('[data-line="2"] a').textContent())!;
    await page.locator('[data-line="2"] a').click();
    await page.waitForURL(`**/generations/${generationId}`);

    // The results file: the API's, line for line.
    await page.goBack();
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download the results file' }).click(),
    ]);
    const text = await (await download.createReadStream()).toArray();
    const fromApi = await api.app.inject({
      method: 'GET',
      url: `/v1/batches/${id}/results`,
      headers: { authorization: `Bearer ${account.key}` },
    });
    expect(Buffer.concat(text).toString('utf8')).toBe(fromApi.body);
    await context.close();
  });

  it('cancel is a form with the session token: lines not started end canceled, never charged', async () => {
    const { api, account, db } = stack;
    const created = await postBatch(api, account.key, {
      requests: batchLines(8, (i) => `slow ${i} [sim:slow=2]`),
    });
    const id: string = created.json().id;
    const { context, page } = await consoleUi.newPage();
    await signIn(page, account.key);
    await page.goto(`/batches/${id}`);
    // Without the session's token the cancel is refused.
    const forged = await context.request.post(`/batches/${id}/cancel`, { form: { _csrf: 'forged' } });
    expect(forged.status()).toBe(403);
    await page.getByRole('button', { name: 'Cancel batch' }).click();
    await page.waitForURL(`**/batches/${id}`);
    const done = await waitForBatch(api, account.key, id);
    expect(done.status).toBe('canceled');
    expect(done.request_counts.canceled).toBeGreaterThan(0);
    const charges = await batchCharges(db.pool, id);
    expect(charges.generations).toBe(8 - done.request_counts.canceled);
    await page.reload();
    expect(await page.locator('[data-batch-status]').textContent()).toBe('canceled');
    await page.getByLabel('Status').selectOption('canceled');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=canceled/);
    expect(await page.locator('[data-line]').count()).toBe(done.request_counts.canceled);
    expect(await page.locator('[data-line] a').count()).toBe(0); // no generation: never started
    await context.close();
  });
});

import { describe, expect, it } from 'vitest';
import { findKeyState, setKeyRules } from '../../src/db/key-limits.js';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { expectAccessible, signIn, useConsole } from '../support/console.js';
import { createGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

describe('keys and apps held to limits, in the console (Chromium)', () => {
  const stack = useGenerationStack({ account: { oneTime: 1000 } });
  const consoleUi = useConsole(stack);

  it(
    'creates a key with limits, shows its spend against them and the limit reached, changes them',
    { timeout: 90_000 },
    async () => {
      const { context, page } = await consoleUi.newPage();
      page.setDefaultTimeout(8000);
      await signIn(page, stack.account.key);
      await page.goto('/keys');
      await page.getByLabel('Name').fill('agent');
      await page.locator('#new-key-spend-limit').fill('4');
      await page.locator('#new-key-reset').selectOption('daily');
      await page.locator('#new-key-models').fill('lumen-lite');
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = (await page.locator('[data-new-key]').textContent())!;
      const keyId = (
        await stack.api.app.inject({ method: 'GET', url: '/v1/key', headers: bearer(key) })
      ).json().id;
      expect(await findKeyState(stack.db.pool, keyId)).toMatchObject({
        name: 'agent',
        spend_limit: 4,
        limit_reset: 'daily',
        models: ['lumen-lite'],
        access: 'full',
      });
      await expectAccessible(page);

      // Spent to the limit through the API: 2 + 2, then a third is refused and the page says so.
      for (const prompt of ['one', 'two'])
        expect((await createGeneration(stack.api, key, { model: 'lumen-lite', prompt })).statusCode).toBe(
          202,
        );
      expect(
        (await createGeneration(stack.api, key, { model: 'lumen-lite', prompt: 'three' })).statusCode,
      ).toBe(402);
      await page.goto('/keys');
      const row = page.locator(`tr[data-key-id="${keyId}"]`);
      expect(await row.locator('[data-limit-words]').textContent()).toContain('4 of 4 credits today (UTC)');
      expect(await row.locator('[data-limit-meter]').getAttribute('value')).toBe('4');
      expect(await row.locator('[data-limit-reached]').count()).toBe(1);

      // Changed: a bigger limit, read-only; held from the key's next request.
      await row.getByText('Change limits').click();
      await row.locator(`#${keyId}-spend-limit`).fill('10');
      await row.locator(`#${keyId}-access`).selectOption('read_only');
      await row.getByRole('button', { name: 'Save limits' }).click();
      await page.waitForURL('**/keys');
      expect(await findKeyState(stack.db.pool, keyId)).toMatchObject({
        spend_limit: 10,
        access: 'read_only',
      });
      expect(await page.locator(`tr[data-key-id="${keyId}"] [data-limit-words]`).textContent()).toContain(
        '4 of 10',
      );

      // A session of that key may look, not make keys; its playground does not generate.
      const limited = await consoleUi.newPage();
      limited.page.setDefaultTimeout(8000);
      await signIn(limited.page, key);
      await limited.page.goto('/keys');
      await limited.page.getByRole('button', { name: 'Create key' }).click();
      expect(await limited.page.getByRole('alert').textContent()).toContain('may not make or change keys');
      await limited.page.goto('/playground');
      await limited.page.getByLabel('Prompt').fill('a lighthouse');
      await limited.page.getByRole('button', { name: 'Generate' }).click();
      expect(await limited.page.getByRole('alert').textContent()).toContain('read-only');
      await limited.context.close();
      await context.close();
    },
  );

  it('Connected apps: an app’s limits shown and changed', async () => {
    const owner = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    await recordGrant(stack.db.pool, {
      grantId: 'grant_limits_test',
      accountId: owner.accountId,
      clientId: 'https://app.example/client',
      clientName: 'An app',
      displayName: 'An app',
      resource: 'http://127.0.0.1/v1/mcp',
      scope: 'mcp',
      rules: { spend_limit: 100, limit_reset: 'daily' },
    });
    const { context, page } = await consoleUi.newPage();
    page.setDefaultTimeout(8000);
    await signIn(page, owner.key);
    await page.goto('/apps');
    const row = page.locator('tr[data-grant-id="grant_limits_test"]');
    expect(await row.locator('[data-limit-words]').textContent()).toContain('0 of 100 credits today (UTC)');
    await expectAccessible(page);
    await row.getByText('Change limits').click();
    await row.locator('#grant_limits_test-spend-limit').fill('25');
    await row.locator('#grant_limits_test-reset').selectOption('weekly');
    await row.locator('#grant_limits_test-models').fill('lumen-pro, lumen-lite');
    await row.getByRole('button', { name: 'Save limits' }).click();
    await page.waitForURL('**/apps');
    const appKeyId = (await page
      .locator('tr[data-grant-id="grant_limits_test"] code')
      .first()
      .textContent())!;
    expect(await findKeyState(stack.db.pool, appKeyId)).toMatchObject({
      kind: 'oauth',
      spend_limit: 25,
      limit_reset: 'weekly',
      models: ['lumen-lite', 'lumen-pro'],
    });
    // A bad limit changes nothing and says why.
    await page.locator('tr[data-grant-id="grant_limits_test"]').getByText('Change limits').click();
    await page.locator('#grant_limits_test-spend-limit').fill('lots');
    await page
      .locator('tr[data-grant-id="grant_limits_test"]')
      .getByRole('button', { name: 'Save limits' })
      .click();
    expect(await page.getByRole('alert').textContent()).toContain('whole number of credits');
    expect(await findKeyState(stack.db.pool, appKeyId)).toMatchObject({ spend_limit: 25 });
    await setKeyRules(stack.db.pool, appKeyId, { spend_limit: null });
    await context.close();
  });
});

import { describe, expect, it } from 'vitest';
import { expectAccessible, signIn, useConsole } from '../support/console.js';
import { promptContains } from '../support/providers/fake-http.js';
import { useRoutedStack } from '../support/routed-stack.js';

/**
 * A routed generation's console page (issue 29 §3): the provider that served it and each route
 * tried (position, provider, job, outcome, why it moved on, time), after a real failover of
 * catalog/examples/routed.json's flux-schnell from the fal stand-in to the Replicate one.
 */
describe('console: the routes a generation tried', () => {
  const { stack, apiEnv, accepted, settled } = useRoutedStack();
  const consoleUi = useConsole({
    get db() {
      return stack.db;
    },
    get worker() {
      return { apiEnv: apiEnv() };
    },
  });

  it('shows fal refusing (why it moved on) and Replicate serving with its job, and the serving provider', async () => {
    stack.fal.failCreate({ kind: 'status', status: 503 }, promptContains('console failover'));
    const generation = await accepted({ prompt: 'console failover' });
    const id = generation.id as string;
    expect(await settled(id)).toMatchObject({ status: 'succeeded', provider: 'replicate' });

    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto(`/generations/${id}`);
    const section = page.locator('[data-route-attempts]');
    expect(await section.count()).toBe(1);
    expect(await page.locator('[data-provider]').textContent()).toBe('replicate');
    const rows = await section.locator('tbody tr').allInnerTexts();
    expect(rows).toHaveLength(2);
    // Route, provider, job, outcome, why it moved on, time (tab-separated cells).
    expect(rows[0]).toMatch(/^1\tfal\t—\tnot accepted\t.*HTTP 503.*\t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    expect(rows[1]).toMatch(/^2\treplicate\treplicate:\S+\taccepted\t—\t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
    await expectAccessible(page);

    // A generation fal served at once: one route, no failover.
    const direct = await accepted({ prompt: 'console direct' });
    expect(await settled(direct.id as string)).toMatchObject({ status: 'succeeded', provider: 'fal' });
    await page.goto(`/generations/${direct.id as string}`);
    expect(await page.locator('[data-provider]').textContent()).toBe('fal');
    const directRows = await section.locator('tbody tr').allInnerTexts();
    expect(directRows).toHaveLength(1);
    expect(directRows[0]).toMatch(/^1\tfal\tfal:\S+\taccepted\t—\t/);
    await context.close();
  });
});

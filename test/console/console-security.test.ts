import { describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { revokeApiKey } from '../../src/db/api-keys-repository.js';
import { setApiAccess } from '../../src/db/accounts-repository.js';
import { runAdminCli } from '../support/admin.js';
import { createPaidAccount } from '../support/api.js';
import { expectAccessible, signIn, useConsole } from '../support/console.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

describe('console: sign-in, sessions and the page defences', () => {
  const stack = useGenerationStack();
  const consoleUi = useConsole(stack);

  it('shows no page without a session, and refuses a wrong key in words', async () => {
    const { context, page } = await consoleUi.newPage();
    for (const path of ['/', '/gallery', '/generations', '/batches', '/playground', '/keys', '/requests']) {
      await page.goto(path);
      expect(new URL(page.url()).pathname, path).toBe('/sign-in');
    }
    await expectAccessible(page);
    await page.getByLabel('API key').fill('gsk_live_' + 'x'.repeat(32));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Unknown API key');
    const revoked = await createApiKey(stack.db.pool, { accountId: stack.account.accountId, name: 'old' });
    await revokeApiKey(stack.db.pool, revoked.record.id);
    await page.getByLabel('API key').fill(revoked.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('revoked');
    await context.close();
  });

  it('opens a session whose cookie is HttpOnly and SameSite=Strict, with the security headers', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    const [session] = (await context.cookies()).filter((c) => c.name === 'console_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', secure: false });
    expect(session!.value).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 bits
    // Only the hash is stored.
    const stored = await stack.db.pool.anyFirst(
      (await import('slonik')).sql.unsafe`SELECT id_sha256 FROM console_sessions`,
    );
    expect(stored).not.toContain(session!.value);
    const response = await page.goto('/');
    const headers = response!.headers();
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['content-security-policy']).toContain("script-src 'self'");
    expect(headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['cache-control']).toBe('no-store');
    await context.close();
  });

  it('refuses a form sent without its CSRF token, and another account’s generation is a 404', async () => {
    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    const keysBefore = await stack.db.pool.oneFirst(
      (await import('slonik')).sql
        .unsafe`SELECT count(*) FROM api_keys WHERE account_id = ${stack.account.accountId}`,
    );
    const forged = await page.request.post('/keys', { form: { name: 'forged' } });
    expect(forged.status()).toBe(403);
    const wrongToken = await page.request.post('/keys', { form: { name: 'forged', _csrf: 'x'.repeat(43) } });
    expect(wrongToken.status()).toBe(403);
    expect(
      await stack.db.pool.oneFirst(
        (await import('slonik')).sql
          .unsafe`SELECT count(*) FROM api_keys WHERE account_id = ${stack.account.accountId}`,
      ),
    ).toBe(keysBefore);

    const other = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const created = await createGeneration(stack.api, other.key, { model: 'lumen-lite', prompt: 'theirs' });
    expect(created.statusCode).toBe(202);
    const theirs = created.json().id as string;
    await pollGeneration(stack.api, other.key, theirs);
    const response = await page.goto(`/generations/${theirs}`);
    expect(response!.status()).toBe(404);
    expect(await page.content()).not.toContain('theirs');
    expect((await page.request.get(`/generations/${theirs}/state`)).status()).toBe(404);
    await context.close();
  });

  it('ends a session when its key is revoked or access is disabled, on its next request', async () => {
    const extra = await createApiKey(stack.db.pool, { accountId: stack.account.accountId, name: 'console' });
    const { context, page } = await consoleUi.newPage();
    await signIn(page, extra.key);
    await revokeApiKey(stack.db.pool, extra.record.id);
    await page.goto('/keys');
    expect(new URL(page.url()).pathname).toBe('/sign-in');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('revoked');

    await signIn(page, stack.account.key);
    await setApiAccess(stack.db.pool, stack.account.accountId, false);
    try {
      await page.goto('/');
      expect(new URL(page.url()).pathname).toBe('/sign-in');
      await expect.poll(() => page.getByRole('alert').textContent()).toContain('disabled');
    } finally {
      await setApiAccess(stack.db.pool, stack.account.accountId, true);
    }
    await context.close();
  });

  it('signs in once with an admin console-link, and never again with the same link', async () => {
    const made = await runAdminCli(
      ['console-link', '--account', stack.account.accountId, '--json'],
      stack.db.url,
      { CONSOLE_PUBLIC_URL: consoleUi.url },
    );
    expect(made.code, made.stderr).toBe(0);
    const link = JSON.parse(made.stdout) as { url: string; api_key_id: string };
    expect(link.url.startsWith(`${consoleUi.url}/sign-in/link?token=`)).toBe(true);
    expect(link.api_key_id).toBe(stack.account.keyId);
    const { context, page } = await consoleUi.newPage();
    await page.goto(link.url);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/');
    const other = await consoleUi.newPage();
    await other.page.goto(link.url);
    await other.page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => other.page.getByRole('alert').textContent()).toContain('used or expired');
    await other.context.close();
    await context.close();
  });
});

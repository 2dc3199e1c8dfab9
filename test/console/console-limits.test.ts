import { sql } from 'slonik';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { rateLimitWords } from '../../src/auth/rate-limit.js';
import { setKeyRules } from '../../src/db/key-limits.js';
import { readOnlyRefusal } from '../../src/generations/key-rules.js';
import { createSignInLink } from '../../src/db/console-sessions.js';
import { randomBase62 } from '../../src/ids.js';
import { newSecret, secretHash } from '../../src/console/session-ids.js';
import { createPaidAccount } from '../support/api.js';
import { cookiesOf, inputValue, playgroundForm, signInOverHttp } from '../support/console-http.js';
import { useConsole } from '../support/console.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * Issue 27 item 4: the console counts clients as the API does (behind the TLS proxy of
 * docker-compose, by the address TRUST_PROXY names, an IPv6 client by its /64), never all sign-ins
 * together; a good key obeys the limiter's verdict; a playground POST is one request against the
 * key's rate limit; and a model that is not in the catalog is refused, never replaced.
 */
describe('console limits: whom failed sign-ins count, the key rate limit, the model asked for', () => {
  const stack = useGenerationStack({ account: { oneTime: 1000 } });
  // A loaded machine may take the worker more than the default 10 s to admit (the POST then answers 503).
  const consoleUi = useConsole(
    stack,
    { TRUST_PROXY: '1', RATE_LIMIT_PER_MINUTE: '5', ADMISSION_TIMEOUT_MS: '30000' },
    { browser: false },
  );
  const from = (address: string) => ({ 'x-forwarded-for': address });
  const badKey = () => `gsk_live_${randomBase62(32)}`;
  const newKey = async (name: string) =>
    (await createApiKey(stack.db.pool, { accountId: stack.account.accountId, name })).key;
  const debits = async () =>
    Number(
      await stack.db.pool.oneFirst(sql.unsafe`
        SELECT count(*) FROM credit_ledger WHERE account_id = ${stack.account.accountId} AND kind = 'debit'`),
    );
  /** Sends the playground's form for `model` (fields only), as the browser sends it. */
  const generate = async (cookie: string, fields: Record<string, string>) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    return fetch(`${consoleUi.url}/playground`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie },
      body: form,
    });
  };

  it('counts failed sign-ins per client behind the proxy: one client locked out is not everyone', async () => {
    const key = await newKey('behind the proxy');
    for (let i = 0; i < 20; i++) {
      expect((await signInOverHttp(consoleUi.url, badKey(), from('203.0.113.7'))).status).toBe(401);
    }
    const locked = await signInOverHttp(consoleUi.url, badKey(), from('203.0.113.7'));
    expect(locked.status).toBe(429);
    expect(locked.text).toContain('Too many failed sign-in attempts from this address');
    expect(Number(locked.retryAfter)).toBeGreaterThan(0);
    // Another client behind the same proxy is not locked out.
    expect((await signInOverHttp(consoleUi.url, badKey(), from('203.0.113.8'))).status).toBe(401);
    // A good key signs in from the locked-out address, as the API lets it through.
    expect((await signInOverHttp(consoleUi.url, key, from('203.0.113.7'))).status).toBe(303);
  });

  it('counts an IPv6 client by its /64, as the API does', async () => {
    for (let i = 1; i <= 20; i++) {
      const address = `2001:db8:5:6::${i.toString(16)}`;
      expect((await signInOverHttp(consoleUi.url, badKey(), from(address))).status).toBe(401);
    }
    // Another address of the same /64 is the same client; the next /64 is another.
    expect((await signInOverHttp(consoleUi.url, badKey(), from('2001:db8:5:6:ffff::1'))).status).toBe(429);
    expect((await signInOverHttp(consoleUi.url, badKey(), from('2001:db8:5:7::1'))).status).toBe(401);
  });

  it('from a locked-out client, a link that works signs in and a used one is refused', async () => {
    const token = newSecret();
    await createSignInLink(stack.db.pool, {
      tokenSha256: secretHash(token),
      accountId: stack.account.accountId,
      apiKeyId: stack.account.keyId,
      validMs: 60_000,
    });
    const useLink = async (address: string) => {
      const page = await fetch(`${consoleUi.url}/sign-in/link?token=${token}`, { headers: from(address) });
      const cookie = cookiesOf(page);
      const csrf = inputValue(await page.text(), '_csrf');
      return fetch(`${consoleUi.url}/sign-in/link`, {
        method: 'POST',
        redirect: 'manual',
        headers: { ...from(address), cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, token }).toString(),
      });
    };
    // Locked out by the first test: the link works all the same (it is the account's own)...
    expect((await useLink('203.0.113.7')).status).toBe(303);
    // ...and once used, it is a failed attempt like any other: refused there, 401 elsewhere.
    const locked = await useLink('203.0.113.7');
    expect(locked.status).toBe(429);
    expect(await locked.text()).toContain('Too many failed sign-in attempts');
    expect((await useLink('203.0.113.9')).status).toBe(401);
  });

  it('counts playground POSTs and sign-ins against the key’s rate limit, charging nothing past it', async () => {
    const key = await newKey('rate limited');
    const signedIn = await signInOverHttp(consoleUi.url, key, from('198.51.100.4')); // 1 of 5
    expect(signedIn.status).toBe(303);
    const before = await debits();
    for (let i = 0; i < 4; i++) {
      const form = await playgroundForm(consoleUi.url, signedIn.cookie, 'lumen-lite');
      const sent = await generate(signedIn.cookie, { ...form, prompt: `request ${i + 2} of 5` });
      expect(sent.status).toBe(303);
    }
    expect(await debits()).toBe(before + 4);
    const form = await playgroundForm(consoleUi.url, signedIn.cookie, 'lumen-lite');
    const refused = await generate(signedIn.cookie, { ...form, prompt: 'the sixth' });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const page = await refused.text();
    expect(page).toContain('Rate limit of 5 requests per minute exceeded for this key');
    expect(page).toContain('data-playground'); // the form again
    expect(await debits()).toBe(before + 4);
    // A sign-in with the key obeys the same verdict.
    const again = await signInOverHttp(consoleUi.url, key, from('198.51.100.4'));
    expect(again.status).toBe(429);
    expect(again.text).toContain('the API&#39;s rate limit');
  });

  it('refuses a model that is unknown or retired in words, and charges nothing', async () => {
    const signedIn = await signInOverHttp(consoleUi.url, await newKey('models'), from('198.51.100.5'));
    expect(signedIn.status).toBe(303);
    const before = await debits();
    const form = await playgroundForm(consoleUi.url, signedIn.cookie, 'lumen-lite');
    const refused = await generate(signedIn.cookie, {
      ...form,
      model: 'lumen-retired',
      prompt: 'which model?',
    });
    expect(refused.status).toBe(400);
    const page = await refused.text();
    expect(page).toContain('The model “lumen-retired” is not available (unknown or retired)');
    expect(page).toContain('nothing was generated or charged');
    expect(page).toContain('data-playground');
    expect(await debits()).toBe(before);
  });

  it('refuses the playground’s requests as the API does (its rate limit, a read-only key), logged with the API’s status and code', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const signedIn = await signInOverHttp(consoleUi.url, account.key, from('198.51.100.6')); // 1 of 5
    expect(signedIn.status).toBe(303);
    await setKeyRules(stack.db.pool, account.keyId, { access: 'read_only' });
    const answers: Array<{ status: number; page: string }> = [];
    for (let i = 0; i < 5; i++) {
      const form = await playgroundForm(consoleUi.url, signedIn.cookie, 'lumen-lite');
      const sent = await generate(signedIn.cookie, { ...form, prompt: `refused ${i}` });
      answers.push({ status: sent.status, page: await sent.text() });
    }
    // Four read-only refusals, each counted as a request, then the key's limit (the sign-in was one).
    expect(answers.map((a) => a.status)).toEqual([403, 403, 403, 403, 429]);
    expect(answers[0]!.page).toContain(readOnlyRefusal().message);
    expect(answers[4]!.page).toContain(`${rateLimitWords(5)} for this key (the API&#39;s limit)`);
    await expect
      .poll(() =>
        stack.db.pool.any(sql.type(z.object({ status_code: z.number(), error_code: z.string().nullable() }))`
          SELECT status_code, error_code FROM api_request_log
          WHERE api_key_id = ${account.keyId} AND path = '/v1/generations' ORDER BY id`),
      )
      .toEqual([
        ...Array.from({ length: 4 }, () => ({ status_code: 403, error_code: 'key_read_only' })),
        { status_code: 429, error_code: 'rate_limited' },
      ]);
  });
});

import { hash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CONSOLE_SESSION_IDLE_MS, pruneConsoleRecords } from '../../src/db/console-sessions.js';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';
import { createPaidAccount } from '../support/api.js';
import { signInOverHttp } from '../support/console-http.js';
import {
  authorizationUrlFor,
  decideConsent,
  publicAppMetadata,
  registerApp,
  registeredAppAuthorization,
} from '../support/oauth.js';
import { redirectUri, resource, useOAuthConsole } from '../support/oauth-console.js';

/**
 * Issue 44: what the authorization server keeps, spoken to as a hostile or careless client would:
 * registrations and metadata fetches limited per address, every stored row pruned, no secret kept,
 * another account's sign-in, metadata documents cached as they say and failures remembered.
 */
describe('OAuth store: limits per address, pruning, account switches, metadata document caching', () => {
  const oauth = useOAuthConsole({
    OAUTH_REGISTRATIONS_PER_HOUR: '50',
    OAUTH_CLIENT_METADATA_FETCHES_PER_MINUTE: '20',
  });
  it('migration 0032 drops the secrets stored before: a public client keeps its row, a confidential one goes with its apps', async () => {
    const hex = (n: number) => n.toString(16).padStart(64, '0');
    const client = (clientId: string, method: string, n: number) =>
      oauth.db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload)
      VALUES ('Client', ${hex(n)}, ${sql.jsonb({ client_id: clientId, client_secret: 'in clear', token_endpoint_auth_method: method })})`);
    await client('confidential-client', 'client_secret_basic', 901);
    await client('public-client', 'none', 902);
    await recordGrant(oauth.db.pool, {
      grantId: 'grant-of-confidential',
      accountId: oauth.account.accountId,
      clientId: 'confidential-client',
      clientName: null,
      displayName: 'Confidential',
      resource,
      scope: 'mcp',
    });
    await oauth.db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload, grant_id, expires_at)
      VALUES ('AccessToken', ${hex(903)}, '{}', 'grant-of-confidential', now() + interval '1 hour'),
             ('Grant', ${hash('sha256', 'grant-of-confidential', 'hex')}, '{}', NULL, now() + interval '1 day')`);
    const migration = await readFile(
      new URL('../../src/db/migrations/0032_oauth_store_limits.sql', import.meta.url),
      'utf8',
    );
    const migrator = new pg.Client({ connectionString: oauth.db.url });
    await migrator.connect();
    await migrator.query(migration).finally(() => migrator.end());
    const rows = await oauth.db.pool.any(sql.type(
      z.object({ model: z.string(), payload: z.record(z.string(), z.unknown()) }),
    )`
      SELECT model, payload FROM oauth_store WHERE id_sha256 IN (${hex(901)}, ${hex(902)}, ${hex(903)}, ${hash('sha256', 'grant-of-confidential', 'hex')})`);
    expect(rows).toEqual([
      { model: 'Client', payload: { client_id: 'public-client', token_endpoint_auth_method: 'none' } },
    ]);
    expect((await oauth.grantsOf('confidential-client')).map((g) => g.revoked_at !== null)).toEqual([true]);
  });

  it('limits registrations per address: 1,000 from one address, 50 stored (no registration access token); pruning leaves no orphan row', async () => {
    const from = { 'x-forwarded-for': '203.0.113.50' };
    const answers: { status: number; retryAfter: string | null; body: Record<string, unknown> }[] = [];
    for (let batch = 0; batch < 20; batch++)
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const answer = await registerApp(
              oauth.consoleUrl,
              publicAppMetadata(`Flood ${batch}.${i}`, redirectUri),
              from,
            );
            return {
              status: answer.status,
              retryAfter: answer.headers.get('retry-after'),
              body: (await answer.json()) as Record<string, unknown>,
            };
          }),
        )),
      );
    const accepted = answers.filter((a) => a.status === 201);
    expect(accepted).toHaveLength(50);
    const refused = answers.filter((a) => a.status !== 201);
    expect(new Set(refused.map((a) => `${a.status} ${String(a.body.error)}`))).toEqual(
      new Set(['429 too_many_requests']),
    );
    expect(Number(refused[0]!.retryAfter)).toBeGreaterThan(0);
    expect(accepted.filter((a) => 'registration_access_token' in a.body)).toEqual([]);
    // Another address is not held back.
    const other = await registerApp(oauth.consoleUrl, publicAppMetadata('Neighbour', redirectUri), {
      'x-forwarded-for': '203.0.113.51',
    });
    expect(other.status).toBe(201);
    // A registration is small: metadata past 5 KiB is refused.
    const large = await registerApp(oauth.consoleUrl, publicAppMetadata('L'.repeat(6000), redirectUri), {
      'x-forwarded-for': '203.0.113.52',
    });
    expect(large.status).toBe(400);
    expect(((await large.json()) as { error: string }).error).toBe('invalid_client_metadata');

    // An app in use, and what an older server left: a registration access token, a token of a grant
    // that was revoked as it was issued (the race of item 6).
    const kept = await oauth.approvedCode('Kept App');
    expect((await oauth.redeem(kept, kept.code)).status).toBe(200);
    const keptGrant = (await oauth.grantsOf(kept.clientId))[0]!.grant_id;
    await oauth.db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload, grant_id, expires_at)
      VALUES ('RegistrationAccessToken', ${'e'.repeat(64)}, '{}', NULL, NULL),
             ('AccessToken', ${'f'.repeat(64)}, '{}', 'grant-revoked-meanwhile', now() + interval '1 hour')`);

    // A week and an hour later, pruning leaves nothing that no live app holds.
    const count = (where: ReturnType<typeof sql.fragment>) =>
      oauth.db.pool.oneFirst(
        sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM oauth_store s WHERE ${where}`,
      );
    const orphans = sql.fragment`
      s.model = 'RegistrationAccessToken'
      OR (s.model = 'Client' AND NOT EXISTS (SELECT 1 FROM oauth_grants g
                                             WHERE g.client_id = s.payload->>'client_id' AND g.revoked_at IS NULL))
      OR (s.model <> 'Client' AND (s.grant_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM oauth_grants g WHERE g.grant_id = s.grant_id AND g.revoked_at IS NULL)))`;
    expect(await count(orphans)).toBeGreaterThanOrEqual(53);
    await oauth.db.pool.query(sql.unsafe`
      UPDATE oauth_store SET created_at = created_at - interval '8 days',
        expires_at = CASE WHEN grant_id IS NULL THEN expires_at - interval '8 days' ELSE expires_at END`);
    while ((await pruneConsoleRecords(oauth.db.pool, CONSOLE_SESSION_IDLE_MS, 1000)) > 0);
    expect(await count(orphans)).toBe(0);
    expect(
      await count(
        sql.fragment`s.grant_id = ${keptGrant} AND s.model IN ('Grant', 'AccessToken', 'RefreshToken')`,
      ),
    ).toBe(3);
  });

  it('limits metadata document fetches per address: past the limit, 429 and no fetch', async () => {
    const from = { 'x-forwarded-for': '203.0.113.60' };
    const answers = [];
    for (let i = 0; i < 25; i++) {
      const path = `/apps/flood-${i}.json`;
      const clientId = `${oauth.documentOrigin}${path}`;
      oauth.documents.set(path, {
        body: { ...publicAppMetadata(`Flood ${i}`, redirectUri), client_id: clientId },
      });
      const { authorizationUrl } = authorizationUrlFor(oauth.consoleUrl, clientId, redirectUri, resource);
      const answer = await fetch(authorizationUrl, {
        redirect: 'manual',
        headers: from,
      });
      answers.push({
        status: answer.status,
        retryAfter: answer.headers.get('retry-after'),
        body: await answer.text(),
      });
    }
    expect(answers.slice(0, 20).map((a) => a.status)).toEqual(Array(20).fill(303));
    expect(answers.slice(20).map((a) => a.status)).toEqual(Array(5).fill(429));
    // A browser's navigation: the console's error page, saying why.
    expect(answers[20]!.body).toContain('too many client metadata documents fetched for this address');
    expect(Number(answers[20]!.retryAfter)).toBeGreaterThan(0);
    expect(oauth.documentRequests.filter((r) => r.startsWith('/apps/flood-'))).toHaveLength(20);
  });

  it('another account signing in within the sign-in session’s 10 minutes connects as itself: no 404, no grant without tokens', async () => {
    const other = await createPaidAccount(oauth.db.pool);
    const first = await registeredAppAuthorization(oauth.consoleUrl, resource, {
      name: 'Shared App',
      redirectUri,
    });
    const asFirst = await decideConsent(oauth.consoleUrl, oauth.cookie, first.authorizationUrl);
    expect(asFirst.back.searchParams.get('code')).toBeTruthy();
    // The same browser: the other account signs in (the first one's OAuth sign-in session is still on).
    const signedIn = (await signInOverHttp(oauth.consoleUrl, other.key)).cookie;
    const jar = [
      ...new Map(
        [asFirst.jar, signedIn]
          .flatMap((j) => j.split('; '))
          .map((pair) => pair.split('=', 2) as [string, string]),
      ),
    ]
      .map(([name, value]) => `${name}=${value}`)
      .join('; ');
    const second = authorizationUrlFor(oauth.consoleUrl, first.clientId, redirectUri, resource);
    const asOther = await decideConsent(oauth.consoleUrl, jar, second.authorizationUrl);
    const code = asOther.back.searchParams.get('code')!;
    expect(code).toBeTruthy();
    const tokens = await oauth.redeem({ clientId: first.clientId, verifier: second.verifier }, code);
    expect(tokens.status).toBe(200);
    // The code is the other account's: its grant, with tokens; every live grant of the app has some.
    const grants = await oauth.db.pool.any(sql.type(z.object({ account_id: z.string(), rows: z.number() }))`
      SELECT g.account_id, (SELECT count(*)::int FROM oauth_store s
                            WHERE s.grant_id = g.grant_id AND s.model IN ('AccessToken', 'RefreshToken')) AS rows
      FROM oauth_grants g WHERE g.client_id = ${first.clientId} AND g.revoked_at IS NULL ORDER BY g.created_at`);
    expect(grants.map((g) => g.account_id)).toEqual([oauth.account.accountId, other.accountId]);
    expect(grants[1]!.rows).toBe(2);

    // An approval whose code is never redeemed (the tab closed, the app gone): an hour later, pruning
    // revokes it and its key row, and Connected apps shows it so.
    const abandoned = await registeredAppAuthorization(oauth.consoleUrl, resource, {
      name: 'Gone App',
      redirectUri,
    });
    await decideConsent(oauth.consoleUrl, oauth.cookie, abandoned.authorizationUrl);
    await oauth.db.pool.query(sql.unsafe`
      UPDATE oauth_grants SET created_at = now() - interval '2 hours' WHERE client_id = ${abandoned.clientId}`);
    await oauth.db.pool.query(sql.unsafe`
      UPDATE oauth_store SET expires_at = now() - interval '1 second'
      WHERE model = 'AuthorizationCode' AND grant_id IN (
        SELECT grant_id FROM oauth_grants WHERE client_id = ${abandoned.clientId})`);
    await pruneConsoleRecords(oauth.db.pool, CONSOLE_SESSION_IDLE_MS, 1000);
    const revoked = await oauth.db.pool.one(sql.type(z.object({ grant: z.boolean(), key: z.boolean() }))`
      SELECT g.revoked_at IS NOT NULL AS grant, k.revoked_at IS NOT NULL AS key
      FROM oauth_grants g JOIN api_keys k ON k.id = g.api_key_id WHERE g.client_id = ${abandoned.clientId}`);
    expect(revoked).toEqual({ grant: true, key: true });
    // The apps in use keep theirs.
    expect((await oauth.grantsOf(first.clientId)).map((g) => g.revoked_at)).toEqual([null, null]);
  });

  describe('metadata documents: their Cache-Control is honoured within bounds, failures are remembered briefly', () => {
    let offsetMs = 0;
    beforeAll(() => {
      const realNow = Date.now.bind(Date);
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offsetMs);
    });
    afterAll(() => {
      vi.restoreAllMocks();
    });
    /** Serves `path` as a document of its own URL (or as `status`), and authorizes with it. */
    const serve = (path: string, headers: Record<string, string> = {}, status?: number) => {
      const clientId = `${oauth.documentOrigin}${path}`;
      oauth.documents.set(path, {
        headers,
        ...(status ? { status } : {}),
        body: { ...publicAppMetadata('Cached App', redirectUri), client_id: clientId },
      });
      return clientId;
    };
    const authorize = async (clientId: string) => {
      const { authorizationUrl } = authorizationUrlFor(oauth.consoleUrl, clientId, redirectUri, resource);
      const answer = await fetch(authorizationUrl, { redirect: 'manual' });
      return { status: answer.status, text: await answer.text() };
    };
    const fetchesOf = (path: string) => oauth.documentRequests.filter((r) => r === path).length;

    it('uses a document for its max-age (600 s): two minutes later it is not fetched again', async () => {
      const clientId = serve('/apps/cached-600.json', { 'cache-control': 'public, max-age=600' });
      expect((await authorize(clientId)).status).toBe(303);
      offsetMs = 120_000;
      expect((await authorize(clientId)).status).toBe(303);
      expect(fetchesOf('/apps/cached-600.json')).toBe(1);
      offsetMs = 601_000;
      expect((await authorize(clientId)).status).toBe(303);
      expect(fetchesOf('/apps/cached-600.json')).toBe(2);
    });

    it('holds a short max-age (5 s) to the 30-second floor', async () => {
      offsetMs = 0;
      const clientId = serve('/apps/cached-5.json', { 'cache-control': 'max-age=5' });
      expect((await authorize(clientId)).status).toBe(303);
      offsetMs = 10_000;
      expect((await authorize(clientId)).status).toBe(303);
      expect(fetchesOf('/apps/cached-5.json')).toBe(1);
      offsetMs = 31_000;
      expect((await authorize(clientId)).status).toBe(303);
      expect(fetchesOf('/apps/cached-5.json')).toBe(2);
    });

    it('remembers a failed document for 30 s: asked again meanwhile, refused without a fetch', async () => {
      offsetMs = 0;
      const failing = serve('/apps/failing.json', {}, 500);
      expect((await authorize(failing)).status).toBe(400);
      const again = await authorize(failing);
      expect(again.status).toBe(400);
      expect(again.text).toContain('it is not fetched again for 30 s');
      expect(fetchesOf('/apps/failing.json')).toBe(1);
      // A document refused for what it says: the first answer names why, the next is not fetched.
      const plain = '/apps/plain-redirect.json';
      oauth.documents.set(plain, {
        body: {
          ...publicAppMetadata('Plain', 'http://evil.example/cb'),
          client_id: `${oauth.documentOrigin}${plain}`,
        },
      });
      expect((await authorize(`${oauth.documentOrigin}${plain}`)).text).toContain('is plain http');
      expect((await authorize(`${oauth.documentOrigin}${plain}`)).text).toContain('is plain http');
      expect(fetchesOf(plain)).toBe(1);
      // Past the 30 s, the failed one is fetched again (and now answers).
      offsetMs = 31_000;
      serve('/apps/failing.json');
      expect((await authorize(failing)).status).toBe(303);
      expect(fetchesOf('/apps/failing.json')).toBe(2);
    });
  });
});

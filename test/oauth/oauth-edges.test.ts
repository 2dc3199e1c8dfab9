import { hash } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createConsoleService, type ConsoleService } from '../../src/console/service.js';
import { loadConfig } from '../../src/config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/logger.js';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';
import { CONSOLE_SESSION_IDLE_MS, pruneConsoleRecords } from '../../src/db/console-sessions.js';
import { signInOverHttp } from '../support/console-http.js';
import { createTestCertificates } from '../support/test-certificates.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import {
  authorizationUrlFor,
  decideConsent,
  publicAppMetadata,
  registerApp,
  registeredAppAuthorization,
  tokenRequest,
} from '../support/oauth.js';

const resource = 'http://127.0.0.1:8080/v1/mcp';
const redirectUri = 'http://127.0.0.1:7/callback';
const grantRow = z.object({ grant_id: z.string(), revoked_at: z.string().nullable() });

/**
 * Issue 44: the authorization server's edges, spoken to over plain HTTP as a hostile or careless
 * client would. The console alone on a fresh database (no API, no worker: tokens are read from the
 * store).
 */
describe('OAuth edges: single-use codes, redirect URIs, consent, registration limits', () => {
  let db: TestDatabase;
  let account: TestAccount;
  let storageDir = '';
  let consoleService: ConsoleService;
  let consoleUrl = '';
  let cookie = '';
  /** Client ID Metadata Documents, served over HTTPS on loopback: path → what is answered. */
  const documents = new Map<string, { status?: number; headers?: Record<string, string>; body: unknown }>();
  const documentRequests: string[] = [];
  let documentServer: https.Server;
  let documentOrigin = '';

  beforeAll(async () => {
    storageDir = await mkdtemp(join(tmpdir(), 'oauth-edges-'));
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool);
    const certificates = await createTestCertificates('localhost');
    documentServer = https.createServer(
      { cert: certificates.server.cert, key: certificates.server.key },
      (request, response) => {
        documentRequests.push(request.url!);
        const document = documents.get(request.url!);
        response.writeHead(document?.status ?? (document ? 200 : 404), {
          'content-type': 'application/json',
          ...document?.headers,
        });
        response.end(JSON.stringify(document?.body ?? {}));
      },
    );
    await new Promise<void>((done) => documentServer.listen(0, '127.0.0.1', done));
    documentOrigin = `https://localhost:${(documentServer.address() as AddressInfo).port}`;
    const port = await freePort();
    consoleUrl = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: 'oauth-edges-unused',
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9/results',
      API_PUBLIC_URL: 'http://127.0.0.1:8080/v1',
      CONSOLE_PORT: String(port),
      // Clients are told apart by X-Forwarded-For, as behind the TLS proxy.
      TRUST_PROXY: '1',
      OAUTH_CLIENT_METADATA_ALLOW_CIDRS: '127.0.0.1',
      OAUTH_REGISTRATIONS_PER_HOUR: '50',
      OAUTH_CLIENT_METADATA_FETCHES_PER_MINUTE: '20',
    });
    consoleService = await createConsoleService(config, createLogger('console-test', 'silent'), {
      outboundExtraCa: [certificates.ca.cert],
    });
    await consoleService.app.listen({ host: '127.0.0.1', port });
    cookie = (await signInOverHttp(consoleUrl, account.key)).cookie;
  });
  afterAll(async () => {
    await consoleService?.close();
    documentServer?.close();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  const grantsOf = (clientId: string) =>
    db.pool.any(sql.type(grantRow)`
      SELECT grant_id, revoked_at FROM oauth_grants WHERE client_id = ${clientId}`);

  /** An app registered and approved: its client id, the code it got back and its PKCE verifier. */
  async function approvedCode(name: string) {
    const app = await registeredAppAuthorization(consoleUrl, resource, { name, redirectUri });
    const { back } = await decideConsent(consoleUrl, cookie, app.authorizationUrl);
    return { ...app, code: back.searchParams.get('code')! };
  }
  const redeem = (app: { clientId: string; verifier: string }, code: string) =>
    tokenRequest(consoleUrl, {
      grant_type: 'authorization_code',
      client_id: app.clientId,
      code,
      code_verifier: app.verifier,
      redirect_uri: redirectUri,
      resource,
    });
  /**
   * Runs `requests` while the store's row for `secret` is locked, until at least two of them wait on
   * the lock (their consume's UPDATE, after each read the row unused), then lets them on: the race
   * of two redemptions, every time.
   */
  async function racing(model: string, secret: string, requests: () => Promise<Response>[]) {
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM oauth_store WHERE model = $1 AND id_sha256 = $2 FOR UPDATE', [
        model,
        hash('sha256', secret, 'hex'),
      ]);
      const answers = Promise.all(requests());
      await expect
        .poll(
          () =>
            db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
              SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'
                AND query LIKE '%UPDATE oauth_store SET consumed_at%'`),
          { timeout: 10_000 },
        )
        .toBeGreaterThanOrEqual(2);
      await locker.query('COMMIT');
      return await outcomes(await answers);
    } finally {
      await locker.end();
    }
  }
  const outcomes = async (answers: Response[]) =>
    Promise.all(
      answers.map(async (a) => ({ status: a.status, body: (await a.json()) as Record<string, string> })),
    );

  it('redeems a code once under concurrency: 10 at once, one 200, nine invalid_grant, the grant revoked', async () => {
    const app = await approvedCode('Racing App');
    const answers = await racing('AuthorizationCode', app.code, () =>
      Array.from({ length: 10 }, () => redeem(app, app.code)),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused.map((a) => [a.status, a.body.error])).toEqual(Array(9).fill([400, 'invalid_grant']));
    // A used code sent again is a reuse (OAuth 2.1 §4.1.3): the tokens it gave are revoked with the grant.
    expect((await grantsOf(app.clientId)).map((g) => g.revoked_at !== null)).toEqual([true]);
    const winner = answers.find((a) => a.status === 200)!.body;
    const refresh = await tokenRequest(consoleUrl, {
      grant_type: 'refresh_token',
      client_id: app.clientId,
      refresh_token: winner.refresh_token!,
    });
    expect(refresh.status).toBe(400);
  });

  it('rotates a refresh token once under concurrency: 10 at once, one 200', async () => {
    const app = await approvedCode('Refreshing App');
    const first = await redeem(app, app.code);
    expect(first.status).toBe(200);
    const { refresh_token: refreshToken } = (await first.json()) as { refresh_token: string };
    const answers = await racing('RefreshToken', refreshToken, () =>
      Array.from({ length: 10 }, () =>
        tokenRequest(consoleUrl, {
          grant_type: 'refresh_token',
          client_id: app.clientId,
          refresh_token: refreshToken,
        }),
      ),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 400 && a.body.error === 'invalid_grant')).toHaveLength(9);
    expect((await grantsOf(app.clientId)).map((g) => g.revoked_at !== null)).toEqual([true]);
  });

  it('registers https, loopback http on any port and reverse-domain app schemes only: anything else is invalid_redirect_uri', async () => {
    const register = async (uri: string) => {
      const answer = await registerApp(consoleUrl, publicAppMetadata('Redirecting App', uri));
      return { uri, status: answer.status, error: ((await answer.json()) as { error?: string }).error };
    };
    const refused = (uri: string) => ({ uri, status: 400, error: 'invalid_redirect_uri' });
    const accepted = (uri: string) => ({ uri, status: 201, error: undefined });
    for (const uri of [
      'http://evil.example/cb',
      'http://127.0.0.1.evil.example/cb',
      'https://user:pass@app.example/cb',
      'myapp://callback',
      'javascript:alert(1)//',
      'data:text/html,hi',
    ])
      expect(await register(uri)).toEqual(refused(uri));
    for (const uri of [
      'https://app.example/callback',
      'http://127.0.0.1:51234/callback',
      'http://localhost/callback',
      'http://[::1]:9/callback',
      'com.example.app:/oauth/callback',
    ])
      expect(await register(uri)).toEqual(accepted(uri));
    // A loopback redirect is matched whatever its port (RFC 8252 §7.3): a native app picks a free one.
    const app = await registeredAppAuthorization(consoleUrl, resource, {
      name: 'Loopback App',
      redirectUri: 'http://127.0.0.1/callback',
    });
    const elsewhere = authorizationUrlFor(
      consoleUrl,
      app.clientId,
      'http://127.0.0.1:61234/callback',
      resource,
    );
    const { back } = await decideConsent(consoleUrl, cookie, elsewhere.authorizationUrl);
    expect(back.origin).toBe('http://127.0.0.1:61234');
    expect(back.searchParams.get('code')).toBeTruthy();
  });

  it('refuses a metadata document whose redirect is plain http elsewhere: never sends a code there', async () => {
    const clientId = `${documentOrigin}/apps/plain-http.json`;
    documents.set('/apps/plain-http.json', {
      body: { ...publicAppMetadata('Plain App', 'http://evil.example/cb'), client_id: clientId },
    });
    const { authorizationUrl } = authorizationUrlFor(
      consoleUrl,
      clientId,
      'http://evil.example/cb',
      resource,
    );
    const answer = await fetch(authorizationUrl, { redirect: 'manual', headers: { cookie } });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('location')).toBeNull();
    expect(await answer.text()).toContain('http://evil.example/cb is plain http');
  });

  /** A page's text as a person reads it. */
  const textOf = (html: string) =>
    html
      .replace(/<[^>]+>/g, ' ')
      .replace(/&#39;|&rsquo;|’/g, "'")
      .replace(/\s+/g, ' ');

  it('the consent page names the host the code goes to (this request’s redirect), and the name as the app’s own', async () => {
    const registered = await registerApp(consoleUrl, {
      ...publicAppMetadata('Claude', 'https://claude.ai/api/mcp/auth_callback'),
      redirect_uris: ['https://claude.ai/api/mcp/auth_callback', 'https://evil.example/cb'],
    });
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const { authorizationUrl } = authorizationUrlFor(
      consoleUrl,
      clientId,
      'https://evil.example/cb',
      resource,
    );
    const { consentHtml, back } = await decideConsent(consoleUrl, cookie, authorizationUrl, 'deny');
    const text = textOf(consentHtml);
    expect(text).toContain('Connect Claude?');
    expect(text).toContain('Approving sends you, with a code that lets it act for you, to evil.example .');
    expect(text).toContain('Sends you back to https://evil.example/cb');
    expect(text).toContain('(the name it gave itself when it registered: not verified)');
    expect(text).not.toContain('claude.ai');
    expect(back.origin).toBe('https://evil.example');
  });

  it('warns when a metadata document’s app sends the code to another host than the document’s', async () => {
    const documentHost = new URL(documentOrigin).host;
    const consentFor = async (path: string, redirect: string) => {
      const clientId = `${documentOrigin}${path}`;
      documents.set(path, {
        body: {
          ...publicAppMetadata('Docs App', 'https://unused.example/cb'),
          redirect_uris: [redirect],
          client_id: clientId,
        },
      });
      const { authorizationUrl } = authorizationUrlFor(consoleUrl, clientId, redirect, resource);
      return textOf((await decideConsent(consoleUrl, cookie, authorizationUrl, 'deny')).consentHtml);
    };
    const elsewhere = await consentFor('/apps/elsewhere.json', 'https://elsewhere.example/cb');
    expect(elsewhere).toContain(
      `This app's description is at ${documentHost} , but the code goes to elsewhere.example , another site.`,
    );
    expect(elsewhere).toContain(`(the name its description at ${documentHost} gives)`);
    const home = await consentFor('/apps/home.json', `${documentOrigin}/callback`);
    expect(home).not.toContain('another site');
    expect(home).toContain(`to ${documentHost} .`);
  });

  it('takes public clients only: a registration asking for a client secret is refused, none is stored', async () => {
    for (const method of ['client_secret_basic', 'client_secret_post']) {
      const answer = await registerApp(consoleUrl, {
        ...publicAppMetadata('Confidential App', redirectUri),
        token_endpoint_auth_method: method,
      });
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: string }).error).toBe('invalid_client_metadata');
    }
    const { token_endpoint_auth_method: _none, ...unsaid } = publicAppMetadata('Unsaid App', redirectUri);
    const registered = await registerApp(consoleUrl, unsaid);
    expect(registered.status, await registered.clone().text()).toBe(201);
    const body = (await registered.json()) as Record<string, unknown>;
    expect(body.token_endpoint_auth_method).toBe('none');
    expect(body).not.toHaveProperty('client_secret');
    const metadata = (await (await fetch(`${consoleUrl}/.well-known/oauth-authorization-server`)).json()) as {
      token_endpoint_auth_methods_supported: string[];
    };
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(['none']);
    expect(
      await db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
        SELECT count(*)::int AS n FROM oauth_store WHERE payload ? 'client_secret'`),
    ).toBe(0);
  });

  it('migration 0032 drops the secrets stored before: a public client keeps its row, a confidential one goes with its apps', async () => {
    const hex = (n: number) => n.toString(16).padStart(64, '0');
    const client = (clientId: string, method: string, n: number) =>
      db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload)
      VALUES ('Client', ${hex(n)}, ${sql.jsonb({ client_id: clientId, client_secret: 'in clear', token_endpoint_auth_method: method })})`);
    await client('confidential-client', 'client_secret_basic', 901);
    await client('public-client', 'none', 902);
    await recordGrant(db.pool, {
      grantId: 'grant-of-confidential',
      accountId: account.accountId,
      clientId: 'confidential-client',
      clientName: null,
      displayName: 'Confidential',
      resource,
      scope: 'mcp',
    });
    await db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload, grant_id, expires_at)
      VALUES ('AccessToken', ${hex(903)}, '{}', 'grant-of-confidential', now() + interval '1 hour'),
             ('Grant', ${hash('sha256', 'grant-of-confidential', 'hex')}, '{}', NULL, now() + interval '1 day')`);
    const migration = await readFile(
      new URL('../../src/db/migrations/0032_oauth_store_limits.sql', import.meta.url),
      'utf8',
    );
    const migrator = new pg.Client({ connectionString: db.url });
    await migrator.connect();
    await migrator.query(migration).finally(() => migrator.end());
    const rows = await db.pool.any(sql.type(
      z.object({ model: z.string(), payload: z.record(z.string(), z.unknown()) }),
    )`
      SELECT model, payload FROM oauth_store WHERE id_sha256 IN (${hex(901)}, ${hex(902)}, ${hex(903)}, ${hash('sha256', 'grant-of-confidential', 'hex')})`);
    expect(rows).toEqual([
      { model: 'Client', payload: { client_id: 'public-client', token_endpoint_auth_method: 'none' } },
    ]);
    expect((await grantsOf('confidential-client')).map((g) => g.revoked_at !== null)).toEqual([true]);
  });

  it('limits registrations per address: 1,000 from one address, 50 stored (no registration access token); pruning leaves no orphan row', async () => {
    const from = { 'x-forwarded-for': '203.0.113.50' };
    const answers: { status: number; retryAfter: string | null; body: Record<string, unknown> }[] = [];
    for (let batch = 0; batch < 20; batch++)
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const answer = await registerApp(
              consoleUrl,
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
    const other = await registerApp(consoleUrl, publicAppMetadata('Neighbour', redirectUri), {
      'x-forwarded-for': '203.0.113.51',
    });
    expect(other.status).toBe(201);
    // A registration is small: metadata past 5 KiB is refused.
    const large = await registerApp(consoleUrl, publicAppMetadata('L'.repeat(6000), redirectUri), {
      'x-forwarded-for': '203.0.113.52',
    });
    expect(large.status).toBe(400);
    expect(((await large.json()) as { error: string }).error).toBe('invalid_client_metadata');

    // An app in use, and what an older server left: a registration access token, a token of a grant
    // that was revoked as it was issued (the race of item 6).
    const kept = await approvedCode('Kept App');
    expect((await redeem(kept, kept.code)).status).toBe(200);
    const keptGrant = (await grantsOf(kept.clientId))[0]!.grant_id;
    await db.pool.query(sql.unsafe`
      INSERT INTO oauth_store (model, id_sha256, payload, grant_id, expires_at)
      VALUES ('RegistrationAccessToken', ${'e'.repeat(64)}, '{}', NULL, NULL),
             ('AccessToken', ${'f'.repeat(64)}, '{}', 'grant-revoked-meanwhile', now() + interval '1 hour')`);

    // A week and an hour later, pruning leaves nothing that no live app holds.
    const count = (where: ReturnType<typeof sql.fragment>) =>
      db.pool.oneFirst(
        sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM oauth_store s WHERE ${where}`,
      );
    const orphans = sql.fragment`
      s.model = 'RegistrationAccessToken'
      OR (s.model = 'Client' AND NOT EXISTS (SELECT 1 FROM oauth_grants g
                                             WHERE g.client_id = s.payload->>'client_id' AND g.revoked_at IS NULL))
      OR (s.model <> 'Client' AND (s.grant_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM oauth_grants g WHERE g.grant_id = s.grant_id AND g.revoked_at IS NULL)))`;
    expect(await count(orphans)).toBeGreaterThanOrEqual(53);
    await db.pool.query(sql.unsafe`
      UPDATE oauth_store SET created_at = created_at - interval '8 days',
        expires_at = CASE WHEN grant_id IS NULL THEN expires_at - interval '8 days' ELSE expires_at END`);
    while ((await pruneConsoleRecords(db.pool, CONSOLE_SESSION_IDLE_MS, 1000)) > 0);
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
      const clientId = `${documentOrigin}${path}`;
      documents.set(path, { body: { ...publicAppMetadata(`Flood ${i}`, redirectUri), client_id: clientId } });
      const { authorizationUrl } = authorizationUrlFor(consoleUrl, clientId, redirectUri, resource);
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
    expect(documentRequests.filter((r) => r.startsWith('/apps/flood-'))).toHaveLength(20);
  });

  it('another account signing in within the sign-in session’s 10 minutes connects as itself: no 404, no grant without tokens', async () => {
    const other = await createPaidAccount(db.pool);
    const first = await registeredAppAuthorization(consoleUrl, resource, { name: 'Shared App', redirectUri });
    const asFirst = await decideConsent(consoleUrl, cookie, first.authorizationUrl);
    expect(asFirst.back.searchParams.get('code')).toBeTruthy();
    // The same browser: the other account signs in (the first one's OAuth sign-in session is still on).
    const signedIn = (await signInOverHttp(consoleUrl, other.key)).cookie;
    const jar = [
      ...new Map(
        [asFirst.jar, signedIn]
          .flatMap((j) => j.split('; '))
          .map((pair) => pair.split('=', 2) as [string, string]),
      ),
    ]
      .map(([name, value]) => `${name}=${value}`)
      .join('; ');
    const second = authorizationUrlFor(consoleUrl, first.clientId, redirectUri, resource);
    const asOther = await decideConsent(consoleUrl, jar, second.authorizationUrl);
    const code = asOther.back.searchParams.get('code')!;
    expect(code).toBeTruthy();
    const tokens = await redeem({ clientId: first.clientId, verifier: second.verifier }, code);
    expect(tokens.status).toBe(200);
    // The code is the other account's: its grant, with tokens; every live grant of the app has some.
    const grants = await db.pool.any(sql.type(z.object({ account_id: z.string(), rows: z.number() }))`
      SELECT g.account_id, (SELECT count(*)::int FROM oauth_store s
                            WHERE s.grant_id = g.grant_id AND s.model IN ('AccessToken', 'RefreshToken')) AS rows
      FROM oauth_grants g WHERE g.client_id = ${first.clientId} AND g.revoked_at IS NULL ORDER BY g.created_at`);
    expect(grants.map((g) => g.account_id)).toEqual([account.accountId, other.accountId]);
    expect(grants[1]!.rows).toBe(2);

    // An approval whose code is never redeemed (the tab closed, the app gone): an hour later, pruning
    // revokes it and its key row, and Connected apps shows it so.
    const abandoned = await registeredAppAuthorization(consoleUrl, resource, {
      name: 'Gone App',
      redirectUri,
    });
    await decideConsent(consoleUrl, cookie, abandoned.authorizationUrl);
    await db.pool.query(sql.unsafe`
      UPDATE oauth_grants SET created_at = now() - interval '2 hours' WHERE client_id = ${abandoned.clientId}`);
    await db.pool.query(sql.unsafe`
      UPDATE oauth_store SET expires_at = now() - interval '1 second'
      WHERE model = 'AuthorizationCode' AND grant_id IN (
        SELECT grant_id FROM oauth_grants WHERE client_id = ${abandoned.clientId})`);
    await pruneConsoleRecords(db.pool, CONSOLE_SESSION_IDLE_MS, 1000);
    const revoked = await db.pool.one(sql.type(z.object({ grant: z.boolean(), key: z.boolean() }))`
      SELECT g.revoked_at IS NOT NULL AS grant, k.revoked_at IS NOT NULL AS key
      FROM oauth_grants g JOIN api_keys k ON k.id = g.api_key_id WHERE g.client_id = ${abandoned.clientId}`);
    expect(revoked).toEqual({ grant: true, key: true });
    // The apps in use keep theirs.
    expect((await grantsOf(first.clientId)).map((g) => g.revoked_at)).toEqual([null, null]);
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
      const clientId = `${documentOrigin}${path}`;
      documents.set(path, {
        headers,
        ...(status ? { status } : {}),
        body: { ...publicAppMetadata('Cached App', redirectUri), client_id: clientId },
      });
      return clientId;
    };
    const authorize = async (clientId: string) => {
      const { authorizationUrl } = authorizationUrlFor(consoleUrl, clientId, redirectUri, resource);
      const answer = await fetch(authorizationUrl, { redirect: 'manual' });
      return { status: answer.status, text: await answer.text() };
    };
    const fetchesOf = (path: string) => documentRequests.filter((r) => r === path).length;

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
      documents.set(plain, {
        body: {
          ...publicAppMetadata('Plain', 'http://evil.example/cb'),
          client_id: `${documentOrigin}${plain}`,
        },
      });
      expect((await authorize(`${documentOrigin}${plain}`)).text).toContain('is plain http');
      expect((await authorize(`${documentOrigin}${plain}`)).text).toContain('is plain http');
      expect(fetchesOf(plain)).toBe(1);
      // Past the 30 s, the failed one is fetched again (and now answers).
      offsetMs = 31_000;
      serve('/apps/failing.json');
      expect((await authorize(failing)).status).toBe(303);
      expect(fetchesOf('/apps/failing.json')).toBe(2);
    });
  });
});

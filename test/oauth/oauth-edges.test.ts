import { hash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signInOverHttp } from '../support/console-http.js';
import { useConsole } from '../support/console.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { decideConsent, registeredAppAuthorization, tokenRequest } from '../support/oauth.js';

const resource = 'http://127.0.0.1:8080/v1/mcp';
const redirectUri = 'http://127.0.0.1:7/callback';
const grantRow = z.object({ grant_id: z.string(), revoked_at: z.string().nullable() });

/**
 * Issue 44: the authorization server's edges, spoken to over plain HTTP as a hostile or careless
 * client would. The console alone on a fresh database (no API, no worker: tokens are read from the
 * store).
 */
describe('OAuth edges: single-use codes, redirect URIs, consent, registration limits', () => {
  const apiEnv: Record<string, string> = {};
  const stack = { worker: { apiEnv } } as {
    db: TestDatabase;
    worker: { apiEnv: Record<string, string> };
    account: TestAccount;
  };
  let storageDir = '';
  beforeAll(async () => {
    storageDir = await mkdtemp(join(tmpdir(), 'oauth-edges-'));
    stack.db = await createTestDatabase();
    stack.account = await createPaidAccount(stack.db.pool);
    Object.assign(apiEnv, {
      TEMPORAL_TASK_QUEUE: 'oauth-edges-unused',
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9/results',
      API_PUBLIC_URL: 'http://127.0.0.1:8080/v1',
    });
  });
  const consoleUi = useConsole(stack, {}, { browser: false });
  let cookie = '';
  beforeAll(async () => {
    cookie = (await signInOverHttp(consoleUi.url, stack.account.key)).cookie;
  });
  afterAll(async () => {
    await stack.db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  const grantsOf = (clientId: string) =>
    stack.db.pool.any(sql.type(grantRow)`
      SELECT grant_id, revoked_at FROM oauth_grants WHERE client_id = ${clientId}`);

  /** An app registered and approved: its client id, the code it got back and its PKCE verifier. */
  async function approvedCode(name: string) {
    const app = await registeredAppAuthorization(consoleUi.url, resource, { name, redirectUri });
    const { back } = await decideConsent(consoleUi.url, cookie, app.authorizationUrl);
    return { ...app, code: back.searchParams.get('code')! };
  }
  const redeem = (app: { clientId: string; verifier: string }, code: string) =>
    tokenRequest(consoleUi.url, {
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
    const locker = new pg.Client({ connectionString: stack.db.url });
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
            stack.db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
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
    const refresh = await tokenRequest(consoleUi.url, {
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
        tokenRequest(consoleUi.url, {
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
});

import { hash } from 'node:crypto';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import {
  authorizationUrlFor,
  decideConsent,
  publicAppMetadata,
  registerApp,
  registeredAppAuthorization,
  tokenRequest,
} from '../support/oauth.js';
import { redirectUri, resource, useOAuthConsole } from '../support/oauth-console.js';

/**
 * Issue 44: what the authorization server gives out, spoken to as a hostile or careless client
 * would: a code or refresh token once, redirects only where a code may go, a consent page that names
 * where the code goes, and no client secret. (Its limits and store: oauth-store.test.ts.)
 */
describe('OAuth edges: single-use codes, redirect URIs, the consent page, public clients', () => {
  // Its tests register a score of apps from one address (oauth-store.test.ts tests the limit).
  const oauth = useOAuthConsole({ OAUTH_REGISTRATIONS_PER_HOUR: '100' });
  /**
   * Runs `requests` while the store's row for `secret` is locked, until at least two of them wait on
   * the lock (their consume's UPDATE, after each read the row unused), then lets them on: the race
   * of two redemptions, every time.
   */
  async function racing(model: string, secret: string, requests: () => Promise<Response>[]) {
    const locker = new pg.Client({ connectionString: oauth.db.url });
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
            oauth.db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
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
    const app = await oauth.approvedCode('Racing App');
    const answers = await racing('AuthorizationCode', app.code, () =>
      Array.from({ length: 10 }, () => oauth.redeem(app, app.code)),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused.map((a) => [a.status, a.body.error])).toEqual(Array(9).fill([400, 'invalid_grant']));
    // A used code sent again is a reuse (OAuth 2.1 §4.1.3): the tokens it gave are revoked with the grant.
    expect((await oauth.grantsOf(app.clientId)).map((g) => g.revoked_at !== null)).toEqual([true]);
    const winner = answers.find((a) => a.status === 200)!.body;
    const refresh = await tokenRequest(oauth.consoleUrl, {
      grant_type: 'refresh_token',
      client_id: app.clientId,
      refresh_token: winner.refresh_token!,
    });
    expect(refresh.status).toBe(400);
  });

  it('rotates a refresh token once under concurrency: 10 at once, one 200', async () => {
    const app = await oauth.approvedCode('Refreshing App');
    const first = await oauth.redeem(app, app.code);
    expect(first.status).toBe(200);
    const { refresh_token: refreshToken } = (await first.json()) as { refresh_token: string };
    const answers = await racing('RefreshToken', refreshToken, () =>
      Array.from({ length: 10 }, () =>
        tokenRequest(oauth.consoleUrl, {
          grant_type: 'refresh_token',
          client_id: app.clientId,
          refresh_token: refreshToken,
        }),
      ),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 400 && a.body.error === 'invalid_grant')).toHaveLength(9);
    expect((await oauth.grantsOf(app.clientId)).map((g) => g.revoked_at !== null)).toEqual([true]);
  });

  it('registers https, loopback http on any port and reverse-domain app schemes only: anything else is invalid_redirect_uri', async () => {
    const register = async (uri: string) => {
      const answer = await registerApp(oauth.consoleUrl, publicAppMetadata('Redirecting App', uri));
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
    const app = await registeredAppAuthorization(oauth.consoleUrl, resource, {
      name: 'Loopback App',
      redirectUri: 'http://127.0.0.1/callback',
    });
    const elsewhere = authorizationUrlFor(
      oauth.consoleUrl,
      app.clientId,
      'http://127.0.0.1:61234/callback',
      resource,
    );
    const { back } = await decideConsent(oauth.consoleUrl, oauth.cookie, elsewhere.authorizationUrl);
    expect(back.origin).toBe('http://127.0.0.1:61234');
    expect(back.searchParams.get('code')).toBeTruthy();
  });

  it('refuses a metadata document whose redirect is plain http elsewhere: never sends a code there', async () => {
    const clientId = `${oauth.documentOrigin}/apps/plain-http.json`;
    oauth.documents.set('/apps/plain-http.json', {
      body: { ...publicAppMetadata('Plain App', 'http://evil.example/cb'), client_id: clientId },
    });
    const { authorizationUrl } = authorizationUrlFor(
      oauth.consoleUrl,
      clientId,
      'http://evil.example/cb',
      resource,
    );
    const answer = await fetch(authorizationUrl, { redirect: 'manual', headers: { cookie: oauth.cookie } });
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
    const registered = await registerApp(oauth.consoleUrl, {
      ...publicAppMetadata('Claude', 'https://claude.ai/api/mcp/auth_callback'),
      redirect_uris: ['https://claude.ai/api/mcp/auth_callback', 'https://evil.example/cb'],
    });
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const { authorizationUrl } = authorizationUrlFor(
      oauth.consoleUrl,
      clientId,
      'https://evil.example/cb',
      resource,
    );
    const { consentHtml, back } = await decideConsent(
      oauth.consoleUrl,
      oauth.cookie,
      authorizationUrl,
      'deny',
    );
    const text = textOf(consentHtml);
    expect(text).toContain('Connect Claude?');
    expect(text).toContain('Approving sends you, with a code that lets it act for you, to evil.example .');
    expect(text).toContain('Sends you back to https://evil.example/cb');
    expect(text).toContain('(the name it gave itself when it registered: not verified)');
    expect(text).not.toContain('claude.ai');
    expect(back.origin).toBe('https://evil.example');
  });

  it('warns when a metadata document’s app sends the code to another host than the document’s', async () => {
    const documentHost = new URL(oauth.documentOrigin).host;
    const consentFor = async (path: string, redirect: string) => {
      const clientId = `${oauth.documentOrigin}${path}`;
      oauth.documents.set(path, {
        body: {
          ...publicAppMetadata('Docs App', 'https://unused.example/cb'),
          redirect_uris: [redirect],
          client_id: clientId,
        },
      });
      const { authorizationUrl } = authorizationUrlFor(oauth.consoleUrl, clientId, redirect, resource);
      return textOf(
        (await decideConsent(oauth.consoleUrl, oauth.cookie, authorizationUrl, 'deny')).consentHtml,
      );
    };
    const elsewhere = await consentFor('/apps/elsewhere.json', 'https://elsewhere.example/cb');
    expect(elsewhere).toContain(
      `This app's description is at ${documentHost} , but the code goes to elsewhere.example , another site.`,
    );
    expect(elsewhere).toContain(`(the name its description at ${documentHost} gives)`);
    const home = await consentFor('/apps/home.json', `${oauth.documentOrigin}/callback`);
    expect(home).not.toContain('another site');
    expect(home).toContain(`to ${documentHost} .`);
  });

  it('takes public clients only: a registration asking for a client secret is refused, none is stored', async () => {
    for (const method of ['client_secret_basic', 'client_secret_post']) {
      const answer = await registerApp(oauth.consoleUrl, {
        ...publicAppMetadata('Confidential App', redirectUri),
        token_endpoint_auth_method: method,
      });
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: string }).error).toBe('invalid_client_metadata');
    }
    const { token_endpoint_auth_method: _none, ...unsaid } = publicAppMetadata('Unsaid App', redirectUri);
    const registered = await registerApp(oauth.consoleUrl, unsaid);
    expect(registered.status, await registered.clone().text()).toBe(201);
    const body = (await registered.json()) as Record<string, unknown>;
    expect(body.token_endpoint_auth_method).toBe('none');
    expect(body).not.toHaveProperty('client_secret');
    const metadata = (await (
      await fetch(`${oauth.consoleUrl}/.well-known/oauth-authorization-server`)
    ).json()) as {
      token_endpoint_auth_methods_supported: string[];
    };
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(['none']);
    expect(
      await oauth.db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
        SELECT count(*)::int AS n FROM oauth_store WHERE payload ? 'client_secret'`),
    ).toBe(0);
  });
});

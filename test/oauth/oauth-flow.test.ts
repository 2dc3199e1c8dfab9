import { hash } from 'node:crypto';
import type { RequestListener } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  auth,
  discoverAuthorizationServerMetadata,
  exchangeAuthorization,
  refreshAuthorization,
  type OAuthClientProvider,
} from '@modelcontextprotocol/sdk/client/auth.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InvalidGrantError, InvalidTargetError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createConsoleService, type ConsoleService } from '../../src/console/service.js';
import { setApiAccess } from '../../src/db/accounts-repository.js';
import { loadConfig } from '../../src/config/service-config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/process/logger.js';
import { runAdminCli } from '../support/admin.js';
import { bearer } from '../support/api.js';
import { chargesOf } from '../support/ledger.js';
import { cookiesOf, inputValue, signInOverHttp } from '../support/console-http.js';
import { useGenerationStack } from '../support/stack.js';
import { createTestCertificates } from '../support/test-certificates.js';

/** A chat app as the SDK's client-side OAuth sees it: what it keeps between calls, in memory. */
class TestApp implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  constructor(
    readonly clientMetadata: OAuthClientMetadata,
    readonly clientMetadataUrl?: string,
  ) {}
  get redirectUrl() {
    return redirectUri;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const redirectUri = 'http://127.0.0.1:7/callback';
const appMetadata = (name: string): OAuthClientMetadata => ({
  client_name: name,
  redirect_uris: [redirectUri],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
});
const storeRow = z.object({ model: z.string(), id_sha256: z.string(), payload: z.string() });
const madeByRow = z.object({ account_id: z.string(), api_key_id: z.string().nullable() });
const grantRow = z.object({
  grant_id: z.string(),
  api_key_id: z.string(),
  revoked_at: z.string().nullable(),
});
const logRow = z.object({ path: z.string(), status_code: z.number() });

describe('OAuth for chat apps: the console as authorization server, the API as resource', () => {
  const apiEnv: Record<string, string> = {};
  let apiOrigin = '';
  let consoleUrl = '';
  beforeAll(async () => {
    const [apiPort, consolePort] = [await freePort(), await freePort()];
    apiOrigin = `http://127.0.0.1:${apiPort}`;
    consoleUrl = `http://127.0.0.1:${consolePort}`;
    Object.assign(apiEnv, { API_PUBLIC_URL: `${apiOrigin}/v1`, CONSOLE_PUBLIC_URL: consoleUrl });
  });
  const stack = useGenerationStack({ apiEnv });
  let consoleService: ConsoleService;
  let cookie = '';
  let documents: https.Server[] = [];
  const documentRequests: string[] = [];
  let documentPort = 0;
  const mcpUrl = () => `${apiOrigin}/v1/mcp`;

  beforeAll(async () => {
    await stack.api.app.listen({ host: '127.0.0.1', port: Number(new URL(apiOrigin).port) });
    const certificates = await createTestCertificates('localhost');
    // Client ID Metadata Documents, served over HTTPS on loopback (allowed at 127.0.0.1 only).
    const handler: RequestListener = (request, response) => {
      documentRequests.push(`${request.socket.localAddress} ${request.url}`);
      const clientId = `https://${request.headers.host}${request.url}`;
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ ...appMetadata('Metadata App'), client_id: clientId }));
    };
    const options = { cert: certificates.server.cert, key: certificates.server.key };
    documents = [https.createServer(options, handler), https.createServer(options, handler)];
    await new Promise<void>((done) => documents[0]!.listen(0, '127.0.0.1', done));
    documentPort = (documents[0]!.address() as AddressInfo).port;
    await new Promise<void>((done) => documents[1]!.listen(documentPort, '127.0.0.2', done));

    const config = loadConfig({
      DATABASE_URL: stack.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      RATE_LIMIT_PER_MINUTE: '1000000',
      CONSOLE_PORT: new URL(consoleUrl).port,
      OAUTH_CLIENT_METADATA_ALLOW_CIDRS: '127.0.0.1,::1',
      ...stack.worker.apiEnv,
      ...apiEnv,
    });
    consoleService = await createConsoleService(config, createLogger('console-test', 'silent'), {
      outboundExtraCa: [certificates.ca.cert],
    });
    await consoleService.app.listen({ host: '127.0.0.1', port: Number(new URL(consoleUrl).port) });
    cookie = (await signInOverHttp(consoleUrl, stack.account.key)).cookie;
  });
  afterAll(async () => {
    await consoleService?.close();
    for (const server of documents) server.close();
  });

  /** The browser's part: the authorization URL, the consent form approved, the code the app gets back. */
  async function approve(url: URL, decision = 'approve'): Promise<URL> {
    let jar = cookie;
    const step = async (target: string, init: RequestInit = {}) => {
      const response = await fetch(new URL(target, consoleUrl), {
        ...init,
        redirect: 'manual',
        headers: { ...(init.headers as Record<string, string>), cookie: jar },
      });
      jar = cookiesOf(response, jar);
      return response;
    };
    const started = await step(url.href);
    expect(started.status, await started.clone().text()).toBe(303);
    const interaction = started.headers.get('location')!;
    expect(interaction).toMatch(/^\/oauth\/interaction\/[\w-]+$/);
    const page = await step(interaction);
    const html = await page.text();
    expect(page.status).toBe(200);
    const posted = await step(interaction, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: inputValue(html, '_csrf'), decision }).toString(),
    });
    expect(posted.status).toBe(303);
    const resumed = await step(posted.headers.get('location')!);
    expect(resumed.status).toBe(303);
    return new URL(resumed.headers.get('location')!);
  }

  /** An app connected through discovery, registration, consent and the code's exchange. */
  async function connect(app: TestApp): Promise<OAuthTokens> {
    expect(await auth(app, { serverUrl: mcpUrl() })).toBe('REDIRECT');
    const back = await approve(app.authorizationUrl!);
    expect(back.origin + back.pathname).toBe(redirectUri);
    const code = back.searchParams.get('code')!;
    expect(await auth(app, { serverUrl: mcpUrl(), authorizationCode: code })).toBe('AUTHORIZED');
    return app.saved!;
  }

  const callMcp = (token: string) =>
    fetch(mcpUrl(), {
      method: 'POST',
      headers: {
        ...bearer(token),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
  const callRest = (token: string) =>
    fetch(`${apiOrigin}/v1/credits`, { headers: bearer(token) }).then(async (r) => ({
      status: r.status,
      body: await r.text(),
    }));
  const grantsOf = () =>
    stack.db.pool.any(sql.type(grantRow)`
      SELECT grant_id, api_key_id, revoked_at FROM oauth_grants
      WHERE account_id = ${stack.account.accountId} ORDER BY created_at`);

  it('serves the metadata: protected resource on the API, authorization server on the console', async () => {
    const resource = await fetch(`${apiOrigin}/.well-known/oauth-protected-resource/v1/mcp`);
    expect(resource.status).toBe(200);
    expect(await resource.json()).toMatchObject({
      resource: mcpUrl(),
      authorization_servers: [consoleUrl],
      bearer_methods_supported: ['header'],
      scopes_supported: ['mcp'],
    });
    const server = await (await fetch(`${consoleUrl}/.well-known/oauth-authorization-server`)).json();
    expect(server).toMatchObject({
      issuer: consoleUrl,
      authorization_endpoint: `${consoleUrl}/oauth/authorize`,
      token_endpoint: `${consoleUrl}/oauth/token`,
      registration_endpoint: `${consoleUrl}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
      client_id_metadata_document_supported: true,
    });
  });

  it('connects an app registered by DCR: its token calls /v1/mcp, not REST; refresh rotates; a reused refresh token revokes', async () => {
    const app = new TestApp(appMetadata('Registered App'));
    const tokens = await connect(app);
    expect(tokens.refresh_token).toBeTruthy();
    expect(tokens.expires_in).toBeLessThanOrEqual(3600);
    // Accepted on the MCP route (a ping answered), refused elsewhere.
    expect((await callMcp(tokens.access_token)).status).toBe(200);
    expect((await callMcp('A'.repeat(43))).status).toBe(401);
    const rest = await callRest(tokens.access_token);
    expect(rest.status).toBe(401);
    // In Authorization only, as the metadata says (bearer_methods_supported: header).
    const asKeyHeader = await fetch(mcpUrl(), {
      method: 'POST',
      headers: { 'x-api-key': tokens.access_token },
    });
    expect(asKeyHeader.status).toBe(401);
    await asKeyHeader.body?.cancel();
    // Its calls are the grant's key row's: in the account's request log.
    const [grant] = await grantsOf();
    await expect
      .poll(() =>
        stack.db.pool.any(sql.type(logRow)`
          SELECT path, status_code FROM api_request_log WHERE api_key_id = ${grant!.api_key_id}`),
      )
      .toEqual([{ path: '/v1/mcp', status_code: 200 }]);
    // Stored only as hashes: no row, id or payload holds a token in clear.
    const rows = await stack.db.pool.any(
      sql.type(storeRow)`SELECT model, id_sha256, payload::text AS payload FROM oauth_store`,
    );
    // Bound to the grant and their own lifetimes, not to the 10-minute sign-in session.
    expect(rows.filter((r) => /"expiresWithSession":\s*true/.test(r.payload))).toEqual([]);
    for (const secret of [tokens.access_token, tokens.refresh_token!]) {
      expect(rows.some((r) => r.id_sha256 === hash('sha256', secret, 'hex'))).toBe(true);
      expect(rows.some((r) => r.payload.includes(secret) || r.id_sha256 === secret)).toBe(false);
    }

    // Refresh: a new pair; the old refresh token is used up.
    expect(await auth(app, { serverUrl: mcpUrl() })).toBe('AUTHORIZED');
    const refreshed = app.saved!;
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect((await callMcp(refreshed.access_token)).status).toBe(200);
    // The old one sent again: refused, and the whole grant with it (OAuth 2.1 §4.3.1).
    const metadata = await discoverAuthorizationServerMetadata(consoleUrl);
    await expect(
      refreshAuthorization(consoleUrl, {
        metadata,
        clientInformation: app.info!,
        refreshToken: tokens.refresh_token!,
        resource: new URL(mcpUrl()),
      }),
    ).rejects.toBeInstanceOf(InvalidGrantError);
    expect((await callMcp(refreshed.access_token)).status).toBe(401);
    await expect(
      refreshAuthorization(consoleUrl, {
        metadata,
        clientInformation: app.info!,
        refreshToken: refreshed.refresh_token!,
        resource: new URL(mcpUrl()),
      }),
    ).rejects.toBeInstanceOf(InvalidGrantError);
    expect((await grantsOf())[0]!.revoked_at).not.toBeNull();
  });

  it('refuses a wrong PKCE verifier and a token for another resource', async () => {
    const app = new TestApp(appMetadata('Careless App'));
    expect(await auth(app, { serverUrl: mcpUrl() })).toBe('REDIRECT');
    const code = (await approve(app.authorizationUrl!)).searchParams.get('code')!;
    const metadata = await discoverAuthorizationServerMetadata(consoleUrl);
    const exchange = (codeVerifier: string, resource: string) =>
      exchangeAuthorization(consoleUrl, {
        metadata,
        clientInformation: app.info!,
        authorizationCode: code,
        codeVerifier,
        redirectUri,
        resource: new URL(resource),
      });
    await expect(exchange(`${app.verifier}x`, mcpUrl())).rejects.toBeInstanceOf(InvalidGrantError);

    // Another resource: refused at the authorization endpoint (back to the app with invalid_target)…
    const elsewhere = new URL(app.authorizationUrl!);
    elsewhere.searchParams.set('resource', 'https://elsewhere.example/mcp');
    const refused = await fetch(elsewhere, { redirect: 'manual', headers: { cookie } });
    expect(new URL(refused.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');
    // …and at the token endpoint.
    const second = new TestApp(appMetadata('Second App'));
    expect(await auth(second, { serverUrl: mcpUrl() })).toBe('REDIRECT');
    const secondCode = (await approve(second.authorizationUrl!)).searchParams.get('code')!;
    await expect(
      exchangeAuthorization(consoleUrl, {
        metadata,
        clientInformation: second.info!,
        authorizationCode: secondCode,
        codeVerifier: second.verifier,
        redirectUri,
        resource: new URL('https://elsewhere.example/mcp'),
      }),
    ).rejects.toBeInstanceOf(InvalidTargetError);
  });

  it('an app identified by its metadata document (CIMD) connects; one at a private address is never fetched', async () => {
    const documentUrl = `https://localhost:${documentPort}/apps/metadata-app.json`;
    const app = new TestApp(appMetadata('Metadata App'), documentUrl);
    const tokens = await connect(app);
    expect(app.info!.client_id).toBe(documentUrl);
    expect((await callMcp(tokens.access_token)).status).toBe(200);
    expect(documentRequests.some((r) => r.endsWith('/apps/metadata-app.json'))).toBe(true);
    // Support disconnects it (admin revoke-app): the token stops at once.
    const grant = (await grantsOf()).at(-1)!;
    const support = await runAdminCli(['revoke-app', '--grant', grant.grant_id], stack.db.url);
    expect(support.stdout, support.stderr).toContain(`Disconnected Metadata App (${grant.grant_id})`);
    expect((await callMcp(tokens.access_token)).status).toBe(401);

    // The same server at 127.0.0.2, outside OAUTH_CLIENT_METADATA_ALLOW_CIDRS: refused without a request.
    const privateApp = new TestApp(
      appMetadata('Private App'),
      `https://127.0.0.2:${documentPort}/private.json`,
    );
    expect(await auth(privateApp, { serverUrl: mcpUrl() })).toBe('REDIRECT');
    const answer = await fetch(privateApp.authorizationUrl!, { redirect: 'manual', headers: { cookie } });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toMatch(/client/i);
    expect(documentRequests.filter((r) => r.includes('private.json'))).toEqual([]);
  });

  it('an app spends the account’s credits through the tools: one debit in the same ledger, under its grant', async () => {
    const app = new TestApp(appMetadata('Spending App'));
    const tokens = await connect(app);
    const client = new Client({ name: 'oauth-app', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(mcpUrl()), {
        requestInit: { headers: bearer(tokens.access_token) },
      }),
    );
    try {
      const result = await client.callTool({
        name: 'create_generation',
        arguments: { request: { model: 'lumen-lite', prompt: 'from a chat app' }, idempotency_key: 'app-1' },
      });
      expect(result.isError ?? false).toBe(false);
      const generation = result.structuredContent as { id: string; credits: number };
      expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({
        debits: 1,
        refunds: 0,
        net: -generation.credits,
      });
      const grant = (await grantsOf()).at(-1)!;
      expect(
        await stack.db.pool.one(sql.type(madeByRow)`
          SELECT account_id, api_key_id FROM generations WHERE id = ${generation.id}`),
      ).toEqual({ account_id: stack.account.accountId, api_key_id: grant.api_key_id });
    } finally {
      await client.close();
    }
  });

  it('lists connected apps; revoking one ends its tokens at once', async () => {
    const app = new TestApp(appMetadata('Revoked App'));
    const tokens = await connect(app);
    expect((await callMcp(tokens.access_token)).status).toBe(200);
    // No more than the account's API access: disabled access stops the app as it stops keys.
    await setApiAccess(stack.db.pool, stack.account.accountId, false);
    const client = new Client({ name: 'oauth-app', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(mcpUrl()), {
        requestInit: { headers: bearer(tokens.access_token) },
      }),
    );
    // The MCP answer to a refused account: each tool call is its 403 in words (docs/mcp.md).
    const refused = await client
      .callTool({ name: 'get_credits', arguments: {} })
      .finally(() => client.close())
      .finally(() => setApiAccess(stack.db.pool, stack.account.accountId, true));
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toMatch(/api_access_disabled/);
    await setApiAccess(stack.db.pool, stack.account.accountId, true);
    expect((await callMcp(tokens.access_token)).status).toBe(200);
    const page = await fetch(`${consoleUrl}/apps`, { headers: { cookie } });
    const html = await page.text();
    expect(html).toContain('Revoked App');
    const grant = (await grantsOf()).at(-1)!;
    const revoked = await fetch(`${consoleUrl}/apps/${grant.grant_id}/revoke`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: inputValue(html, '_csrf') }).toString(),
    });
    expect(revoked.status).toBe(303);
    expect((await callMcp(tokens.access_token)).status).toBe(401);
    // The refresh is refused: the app must ask the person again.
    await expect(auth(app, { serverUrl: mcpUrl() })).rejects.toBeInstanceOf(InvalidGrantError);
    const left = await stack.db.pool.any(
      sql.type(
        storeRow,
      )`SELECT model, id_sha256, payload::text AS payload FROM oauth_store WHERE grant_id = ${grant.grant_id}`,
    );
    expect(left).toEqual([]);
  });

  it('a person not signed in signs in first, then comes back to the consent page', async () => {
    const app = new TestApp(appMetadata('Later App'));
    expect(await auth(app, { serverUrl: mcpUrl() })).toBe('REDIRECT');
    const started = await fetch(app.authorizationUrl!, { redirect: 'manual' });
    let jar = cookiesOf(started);
    const interaction = started.headers.get('location')!;
    // Arriving from the app's site, the Strict session cookie is not sent: the page reloads itself once.
    const first = await fetch(new URL(interaction, consoleUrl), { headers: { cookie: jar } });
    expect(first.headers.get('refresh')).toBe(`0; url=${interaction}?again`);
    expect(await first.text()).toContain(`href="${interaction}?again"`);
    const again = await fetch(new URL(`${interaction}?again`, consoleUrl), {
      redirect: 'manual',
      headers: { cookie: jar },
    });
    expect(again.headers.get('location')).toBe(`/sign-in?next=${encodeURIComponent(interaction)}`);
    const form = await fetch(new URL(again.headers.get('location')!, consoleUrl), {
      headers: { cookie: jar },
    });
    jar = cookiesOf(form, jar);
    const formHtml = await form.text();
    expect(inputValue(formHtml, 'next')).toBe(interaction);
    const signedIn = await fetch(`${consoleUrl}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        _csrf: inputValue(formHtml, '_csrf'),
        key: stack.account.key,
        next: interaction,
      }),
    });
    expect(signedIn.headers.get('location')).toBe(interaction);
    jar = cookiesOf(signedIn, jar);
    const consent = await fetch(new URL(interaction, consoleUrl), { headers: { cookie: jar } });
    const consentHtml = await consent.text();
    expect(consentHtml).toContain('Connect Later App?');
    expect(consentHtml).toContain(app.info!.client_id);
    expect(consentHtml).toMatch(/data-balance="\d+"/);
    // Denied: back to the app with access_denied, and no grant.
    const before = (await grantsOf()).length;
    const denied = await fetch(new URL(interaction, consoleUrl), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: inputValue(consentHtml, '_csrf'), decision: 'deny' }).toString(),
    });
    jar = cookiesOf(denied, jar);
    const back = await fetch(new URL(denied.headers.get('location')!, consoleUrl), {
      redirect: 'manual',
      headers: { cookie: jar },
    });
    expect(new URL(back.headers.get('location')!).searchParams.get('error')).toBe('access_denied');
    expect((await grantsOf()).length).toBe(before);
    // A consent form without the session's token is refused.
    const forged = await fetch(new URL(interaction, consoleUrl), {
      method: 'POST',
      headers: { cookie: jar, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: 'forged', decision: 'approve' }).toString(),
    });
    expect(forged.status).toBe(403);
  });
});

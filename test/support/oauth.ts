import { createHash, randomBytes } from 'node:crypto';
import { sql, type CommonQueryMethods } from 'slonik';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';
import { cookiesOf, inputValue } from './console-http.js';

/** What a chat app registers by default: a public client with one redirect URI. */
export const publicAppMetadata = (name: string, redirectUri: string) => ({
  client_name: name,
  redirect_uris: [redirectUri],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
  scope: 'mcp',
});

/** POST /oauth/register (Dynamic Client Registration) with `metadata`; the raw answer. */
export function registerApp(
  consoleUrl: string,
  metadata: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${consoleUrl}/oauth/register`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
}

/** The authorization URL (PKCE S256, `resource` if given) that sends a person to approve `clientId`. */
export function authorizationUrlFor(
  consoleUrl: string,
  clientId: string,
  redirectUri: string,
  resource: string | null,
): { authorizationUrl: string; verifier: string } {
  const verifier = randomBytes(32).toString('base64url');
  const url = new URL(`${consoleUrl}/oauth/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    scope: 'mcp',
    ...(resource ? { resource } : {}),
    state: randomBytes(8).toString('hex'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  return { authorizationUrl: url.href, verifier };
}

/**
 * An app registered at the console's authorization server by Dynamic Client Registration, and the
 * authorization URL (PKCE S256, the MCP URL as resource) that would send a person to approve it.
 */
export async function registeredAppAuthorization(
  consoleUrl: string,
  resource: string | null,
  app: { name: string; redirectUri: string },
): Promise<{ clientId: string; authorizationUrl: string; verifier: string }> {
  const registered = await registerApp(consoleUrl, publicAppMetadata(app.name, app.redirectUri));
  if (registered.status !== 201)
    throw new Error(`registration: ${registered.status} ${await registered.text()}`);
  const { client_id: clientId } = (await registered.json()) as { client_id: string };
  return { clientId, ...authorizationUrlFor(consoleUrl, clientId, app.redirectUri, resource) };
}

/** A fetch that carries a cookie jar by hand and follows no redirect (the browser's steps, one at a time). */
export function cookieWalker(origin: string, jar: string) {
  const walker = {
    jar,
    async step(target: string, init: RequestInit = {}): Promise<Response> {
      const response = await fetch(new URL(target, origin), {
        ...init,
        redirect: 'manual',
        headers: { ...(init.headers as Record<string, string>), cookie: walker.jar },
      });
      walker.jar = cookiesOf(response, walker.jar);
      return response;
    },
  };
  return walker;
}

/**
 * The browser's part of an authorization, signed in with `cookie`: the authorization URL, the
 * consent page (its HTML), the form posted with `decision`, and where the app is sent back to.
 */
export async function decideConsent(
  consoleUrl: string,
  cookie: string,
  authorizationUrl: string,
  decision: 'approve' | 'deny' = 'approve',
): Promise<{ consentHtml: string; back: URL; jar: string }> {
  const browser = cookieWalker(consoleUrl, cookie);
  const started = await browser.step(authorizationUrl);
  if (started.status !== 303) throw new Error(`authorize: ${started.status} ${await started.text()}`);
  const interaction = started.headers.get('location')!;
  const page = await browser.step(interaction);
  const consentHtml = await page.text();
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${consentHtml}`);
  const posted = await browser.step(interaction, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: inputValue(consentHtml, '_csrf'), decision }).toString(),
  });
  const resumed = await browser.step(posted.headers.get('location')!);
  const back = resumed.headers.get('location');
  if (resumed.status !== 303 || !back)
    throw new Error(`resuming the authorization: ${resumed.status} ${await resumed.text()}`);
  return { consentHtml, back: new URL(back), jar: browser.jar };
}

/** POST /oauth/token with a form; the raw answer. */
export function tokenRequest(consoleUrl: string, form: Record<string, string>): Promise<Response> {
  return fetch(`${consoleUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(form).toString(),
  });
}

/**
 * An access token as the console's authorization server stores one (oauth-store.ts): a grant of the
 * account (and the key row it acts as), and an unexpired AccessToken row for `resource` carrying
 * `scope`, keyed by the token's SHA-256. What the MCP endpoint reads, without a browser's consent.
 */
export async function storedAccessToken(
  db: CommonQueryMethods,
  input: { accountId: string; resource: string; scope: string },
): Promise<string> {
  const grantId = randomBytes(16).toString('base64url');
  await recordGrant(db, {
    grantId,
    accountId: input.accountId,
    clientId: `client-${grantId}`,
    clientName: 'Test App',
    displayName: 'Test App',
    resource: input.resource,
    scope: input.scope,
  });
  const token = randomBytes(32).toString('base64url');
  const payload = { kind: 'AccessToken', aud: input.resource, scope: input.scope, grantId };
  await db.query(sql.unsafe`
    INSERT INTO oauth_store (model, id_sha256, payload, grant_id, expires_at)
    VALUES ('AccessToken', ${createHash('sha256').update(token).digest('hex')}, ${sql.jsonb(payload)},
            ${grantId}, now() + interval '1 hour')`);
  return token;
}

import { createHash, randomBytes } from 'node:crypto';
import { sql, type CommonQueryMethods } from 'slonik';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';

/**
 * An app registered at the console's authorization server by Dynamic Client Registration, and the
 * authorization URL (PKCE S256, the MCP URL as resource) that would send a person to approve it.
 */
export async function registeredAppAuthorization(
  consoleUrl: string,
  resource: string | null,
  app: { name: string; redirectUri: string },
): Promise<{ clientId: string; authorizationUrl: string; verifier: string }> {
  const registered = await fetch(`${consoleUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: app.name,
      redirect_uris: [app.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: 'mcp',
    }),
  });
  if (registered.status !== 201)
    throw new Error(`registration: ${registered.status} ${await registered.text()}`);
  const { client_id: clientId } = (await registered.json()) as { client_id: string };
  const verifier = randomBytes(32).toString('base64url');
  const url = new URL(`${consoleUrl}/oauth/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: app.redirectUri,
    scope: 'mcp',
    ...(resource ? { resource } : {}),
    state: randomBytes(8).toString('hex'),
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  return { clientId, authorizationUrl: url.href, verifier };
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

import { createHash, randomBytes } from 'node:crypto';

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

/**
 * The one protected resource the console's authorization server issues tokens for: the API's MCP
 * endpoint, `{base_url}/mcp` (RFC 8707 resource indicator), and where its metadata is (RFC 9728).
 */

/** The only scope: use this service's MCP tools with the account's API access. */
export const MCP_SCOPE = 'mcp';

/** The MCP endpoint's route on the API. */
export const MCP_ROUTE = '/v1/mcp';

/** The MCP URL clients are told to call (and tokens are issued for): `{base_url}/mcp`. */
export function mcpResourceUrl(apiPublicUrl: string): string {
  return `${apiPublicUrl.replace(/\/$/, '')}/mcp`;
}

/**
 * Where RFC 9728 puts a resource's metadata: `/.well-known/oauth-protected-resource` followed by
 * the resource's path, on the resource's origin.
 */
export function protectedResourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  return `${url.origin}/.well-known/oauth-protected-resource${url.pathname === '/' ? '' : url.pathname}`;
}

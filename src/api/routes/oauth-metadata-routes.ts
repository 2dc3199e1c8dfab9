import type { FastifyInstance } from 'fastify';
import { MCP_SCOPE, protectedResourceMetadataUrl } from '../../auth/oauth-resource.js';

export interface OAuthMetadataDeps {
  /** The MCP URL (`{base_url}/mcp`): the resource. */
  resource: string;
  /** The console's issuer (CONSOLE_PUBLIC_URL): the one authorization server. */
  issuer: string;
}

/**
 * The MCP endpoint's protected-resource metadata (RFC 9728), public: which authorization server
 * issues tokens for it (the console), how they are sent, and the scope. A chat app that meets the
 * MCP endpoint's 401 reads it, then signs in through the console.
 */
export function oauthMetadataRoutes(app: FastifyInstance, deps: OAuthMetadataDeps): void {
  const metadata = {
    resource: deps.resource,
    authorization_servers: [deps.issuer],
    bearer_methods_supported: ['header'],
    scopes_supported: [MCP_SCOPE],
    resource_name: 'Generation service MCP server',
  };
  const path = new URL(protectedResourceMetadataUrl(deps.resource)).pathname;
  app.get(path, { config: { public: true } }, (_request, reply) =>
    reply
      .header('cache-control', 'public, max-age=300')
      .header('access-control-allow-origin', '*')
      .send(metadata),
  );
}

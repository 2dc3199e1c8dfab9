import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import { MCP_SCOPE } from '../../auth/oauth-resource.js';
import { oauthAdapterClass } from '../../db/oauth-store.js';
import { serverSecret } from '../../db/oauth-server-secrets.js';
import { escapeHtml } from './html.js';
import { checkClientMetadata, MAX_CLIENT_METADATA_BYTES } from './client-metadata.js';
import { clientSubjectOf, type OAuthClientLimits, type TooManyRequests } from './client-limits.js';
import { METADATA_CACHE_SECONDS, MetadataDocuments, type MetadataFetchRules } from './metadata-documents.js';

export interface AuthorizationServerOptions {
  db: CommonQueryMethods;
  /** The console's public URL: the issuer. */
  issuer: string;
  /** The MCP URL: the one resource tokens are issued for. */
  resource: string;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  /** How a Client ID Metadata Document is fetched. */
  clientMetadata: MetadataFetchRules;
  /** Registrations and metadata document fetches per client address. */
  limits: OAuthClientLimits;
  logger: Logger;
}

/** The authorization server's paths on the console (all under /oauth but its metadata). */
export const oauthRoutes = {
  authorization: '/oauth/authorize',
  token: '/oauth/token',
  registration: '/oauth/register',
  revocation: '/oauth/revoke',
  jwks: '/oauth/jwks',
} as const;

/** Where a sign-in and consent of the authorization server happens: a console page. */
export const interactionPath = (uid: string) => `/oauth/interaction/${uid}`;

/**
 * The console's OAuth 2.1 authorization server for chat apps: oidc-provider (a certified,
 * maintained implementation) configured for one resource (the MCP URL, RFC 8707), the
 * authorization code grant with PKCE S256 only, public clients registered by Dynamic Client
 * Registration (RFC 7591) or identified by a Client ID Metadata Document, opaque access tokens
 * (`accessTokenTtlSeconds`) and rotated refresh tokens; a reused refresh token revokes its grant.
 * Its storage is PostgreSQL (oauth-store.ts); its signing keys and cookie keys are made once and
 * kept there (oauth_server_secrets). People sign in and approve on console pages (interactionPath).
 */
export async function createAuthorizationServer(options: AuthorizationServerOptions): Promise<Provider> {
  const [jwks, cookieKeys] = await Promise.all([
    serverSecret(options.db, 'jwks', () => Promise.resolve({ keys: [newSigningKey()] })),
    serverSecret(options.db, 'cookie_keys', () => Promise.resolve([randomBytes(32).toString('base64url')])),
  ]);
  const documents = new MetadataDocuments(options.clientMetadata);
  const resourceServer = {
    scope: MCP_SCOPE,
    audience: options.resource,
    accessTokenTTL: options.accessTokenTtlSeconds,
    accessTokenFormat: 'opaque' as const,
  };
  const configuration: Configuration = {
    adapter: oauthAdapterClass(options.db),
    jwks,
    cookies: {
      keys: cookieKeys,
      names: { session: 'oauth_session', interaction: 'oauth_interaction', resume: 'oauth_resume' },
    },
    routes: { ...oauthRoutes },
    scopes: [MCP_SCOPE, 'offline_access'],
    responseTypes: ['code'],
    pkce: { required: () => true },
    // MCP clients are public (OAuth 2.1 §2.1): PKCE, no secret to keep, none stored here.
    clientAuthMethods: ['none'],
    // Redirects are https, loopback http or a native app's own scheme, for every kind of client;
    // no client holds a secret (see checkClientMetadata).
    extraClientMetadata: { properties: ['redirect_uris', 'client_secret'], validator: checkClientMetadata },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    },
    features: {
      devInteractions: { enabled: false },
      // No registration access token: nothing reads or changes a registration afterwards (RFC 7592
      // is off), so none is made or stored.
      registration: { enabled: true, issueRegistrationAccessToken: false },
      revocation: { enabled: true },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      clientIdMetadataDocument: {
        enabled: true,
        ack: 'draft-02',
        // Asked before each fetch (a document not in the cache): one that failed lately is not
        // fetched again yet; the others are counted for the requesting address.
        allowFetch: (ctx, clientId) => {
          documents.refuseIfFailedLately(clientId);
          const refused = options.limits.metadataFetch(clientSubjectOf(ctx?.req));
          if (refused) throw withRetryAfter(ctx, refused);
          return true;
        },
        cacheDuration: METADATA_CACHE_SECONDS,
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => options.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== options.resource)
            throw new errors.InvalidTarget(`tokens are issued for ${options.resource} only`);
          return resourceServer;
        },
      },
    },
    // Every authorization asks the person (a console page); the grant it approves is the one used.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // Tokens live by their own lifetimes and the grant, never by the short sign-in session below
    // (oidc-provider would otherwise end them with it unless offline_access was asked for).
    expiresWithSession: () => false,
    rotateRefreshToken: true,
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    interactions: { url: (_ctx, interaction) => interactionPath(interaction.uid) },
    // Browser-based MCP clients call the token and registration endpoints from their own origin.
    clientBasedCORS: () => true,
    ttl: {
      AccessToken: options.accessTokenTtlSeconds,
      AuthorizationCode: 60,
      RefreshToken: options.refreshTokenTtlSeconds,
      Grant: 365 * 24 * 3600,
      Interaction: 600,
      // The console's own session is what says who is signed in; this one only spans a sign-in.
      Session: 600,
    },
    fetch: (input, init) => documents.fetch(input instanceof Request ? input.url : input.toString(), init),
    fetchResponseBodyLimits: { 'client_id metadata document': MAX_CLIENT_METADATA_BYTES },
    renderError: (ctx, out) => {
      ctx.type = 'html';
      ctx.body = errorPage(out.error_description ?? out.error);
      return Promise.resolve();
    },
  };
  const provider = new Provider(options.issuer, configuration);
  provider.proxy = true;
  // Its own failures (a 500 it answered) go to the console's log; refusals of clients are answers.
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    options.logger.error({ err: error }, 'authorization server failed a request'),
  );
  provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<unknown>) => {
    if (ctx.method === 'POST' && ctx.path === oauthRoutes.registration) {
      const refused = options.limits.registration(clientSubjectOf(ctx.req));
      if (refused) {
        withRetryAfter(ctx, refused);
        ctx.set('cache-control', 'no-store');
        ctx.set('access-control-allow-origin', '*');
        ctx.status = refused.statusCode;
        ctx.body = { error: refused.error, error_description: refused.error_description };
        return;
      }
    }
    await next();
    ctx.set('x-content-type-options', 'nosniff');
    ctx.set('referrer-policy', 'no-referrer');
    ctx.set('x-frame-options', 'DENY');
  });
  return provider;
}

/** A 429's Retry-After, on the answer being made. */
function withRetryAfter(ctx: KoaContextWithOIDC | undefined, refused: TooManyRequests): TooManyRequests {
  ctx?.set('retry-after', String(refused.retryAfterSeconds));
  return refused;
}

function newSigningKey(): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    ...privateKey.export({ format: 'jwk' }),
    alg: 'RS256',
    use: 'sig',
    kid: randomBytes(8).toString('hex'),
  };
}

function errorPage(message: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in failed · Generation console</title><link rel="stylesheet" href="/static/console.css"></head><body><main id="main"><section class="card narrow"><h1>The app's sign-in failed</h1><p>${escapeHtml(message)}</p><p>Go back to the app and connect again.</p></section></main></body></html>`;
}

import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthOutcome, Authenticator, PresentedKey, Principal } from '../auth/authenticator.js';
import { OAuthTokenAuthenticator } from '../auth/oauth-tokens.js';
import type { RequestLogWriter } from '../db/request-log-writer.js';
import { requestLogEntry } from '../db/request-log-repository.js';
import { readOnlyRefusal } from '../generations/admission/key-rules.js';

export interface AuthPluginOptions {
  authenticator: Authenticator;
  requestLog: RequestLogWriter;
  /**
   * OAuth access tokens from the console's authorization server, taken on `oauthPath` only (the
   * MCP endpoint, the tokens' one resource) and in `Authorization: Bearer` only (RFC 6750, as the
   * resource's metadata says); a token sent any other way or to any other route is an unknown key.
   */
  oauthTokens?: OAuthTokenAuthenticator;
  oauthPath?: string;
}

/**
 * Authenticates every route not marked `config: { public: true }` (and unknown routes, through
 * the `authenticate` it decorates the app with, which the errors plugin calls), in the order the
 * spec implies (limitsPlugin): a failed authentication from an address over its limit is 429, else
 * 401; a recognised key of an account that may not call is 403; a valid key meets its request budget
 * (429), whatever others failed from its address. Every request made
 * with a recognised key is written to the request log, rejected ones too, so the key is resolved
 * even for a blocked address; `logRequest` (decorated too) writes answers given outside Fastify's
 * hooks. Registered after limitsPlugin, whose `callerLimits` it asks.
 */
export const authPlugin = fp<AuthPluginOptions>(
  (app, options, registered) => {
    app.decorateRequest('principal', null);
    app.decorateRequest('recognisedKey', null);

    // Every response names its request, errors and public routes included.
    app.addHook('onRequest', (request, reply, next) => {
      reply.header('x-request-id', request.id);
      next();
    });

    // Callback style, not async: a cached key counted in memory is checked without allocating a promise.
    // Attached per route (all but `config.public` ones) when routes are declared, rather than tested on
    // every request.
    const authenticate: onRequestHookHandler = (request, reply, next) => {
      const presented = presentedKey(request);
      const outcome =
        options.oauthTokens &&
        presented &&
        'key' in presented &&
        OAuthTokenAuthenticator.looksLikeToken(presented.key) &&
        request.headers.authorization !== undefined &&
        request.url.split('?')[0] === options.oauthPath
          ? options.oauthTokens.authenticate(presented.key, app.callerLimits.lookupRefusal())
          : options.authenticator.authenticate(presented, app.callerLimits.lookupRefusal());
      if (outcome instanceof Promise) {
        // A throw in judge must reach Fastify, not become an unhandled rejection (which ends the
        // process): a client that closed its connection during the lookup has no address any more.
        outcome.then((o) => judge(request, reply, o, next)).catch(next);
      } else {
        judge(request, reply, outcome, next);
      }
    };
    app.addHook('onRoute', (route) => {
      if (route.config?.public) return;
      const existing = route.onRequest ? [route.onRequest].flat() : [];
      const changes = [route.method].flat().some((m) => m !== 'GET' && m !== 'HEAD');
      const refuses = changes && !readOnlyAllowedPaths.has(route.url);
      route.onRequest = [authenticate, ...(refuses ? [refuseReadOnly] : []), ...existing];
    });

    /** Records who called, then leaves the answer to the limits (one call to them per request). */
    function judge(
      request: FastifyRequest,
      reply: FastifyReply,
      outcome: AuthOutcome,
      next: (error?: Error) => void,
    ): void {
      // The key is resolved even when the address is blocked, so that a refused request made with a
      // key still goes to its account's request log (the spec's rule 12), and a valid key is let
      // through. A request the limits refuse never reaches a route, so its principal is unread.
      request.recognisedKey = outcome.ok ? outcome.principal : outcome.recognised;
      request.principal = outcome.ok ? outcome.principal : null;
      app.callerLimits.judge(request, reply, outcome, next);
    }

    /** Writes a request made with a recognised key to the request log, whatever its answer. */
    const logRequest = (request: FastifyRequest, reply: FastifyReply) => {
      const key = request.recognisedKey;
      if (key) {
        options.requestLog.add(
          requestLogEntry(
            key,
            {
              requestId: String(reply.getHeader('x-request-id') ?? request.id),
              method: request.method,
              path: request.url,
              ip: request.ip,
              userAgent: request.headers['user-agent'] ?? null,
            },
            { statusCode: reply.statusCode, errorCode: request.errorCode, durationMs: reply.elapsedTime },
          ),
        );
      }
    };
    app.addHook('onResponse', (request, reply, next) => {
      logRequest(request, reply);
      next();
    });
    app.decorate('authenticate', authenticate);
    app.decorate('logRequest', logRequest);
    registered();
  },
  { name: 'api-auth', fastify: '5.x', dependencies: ['api-limits'] },
);

/**
 * The routes a read-only key may call although they are not GETs: the quotes (nothing is charged,
 * started or stored) and the MCP endpoint (its tools that create or cancel refuse one by one).
 */
export const readOnlyAllowedPaths: ReadonlySet<string> = new Set([
  '/v1/generations/quote',
  '/v1/batches/quote',
  '/v1/mcp',
]);

/** A read-only key's answer on a route that creates, cancels or changes: before the body is read. */
const refuseReadOnly: onRequestHookHandler = (request, _reply, next) => {
  if (request.principal?.access === 'read_only') next(readOnlyRefusal());
  else next();
};

/**
 * `Authorization: Bearer <key>` or `x-api-key: <key>` (the spec's two forms). Any other
 * Authorization header, a bare key included, is refused with a message saying the form: taking a
 * bare key would be a third form that clients come to rely on.
 */
function presentedKey(request: FastifyRequest): PresentedKey {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) return { key: match[1]! };
    return {
      problem:
        'The Authorization header must be "Bearer <API_KEY>" (the scheme Bearer, a space, then the key); or send the key alone in x-api-key.',
    };
  }
  const header = request.headers['x-api-key'];
  const key = Array.isArray(header) ? header[0] : header;
  return key === undefined ? undefined : { key };
}

/** The authenticated caller of a route that is not public. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route reached without authentication');
  return request.principal;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Authenticates a request (authPlugin): the hook every route but a public one runs first. */
    authenticate: onRequestHookHandler;
    /** Writes a request made with a recognised key to the request log (for answers given outside Fastify's hooks). */
    logRequest(request: FastifyRequest, reply: FastifyReply): void;
  }
  interface FastifyRequest {
    principal: Principal | null;
    /** The key's owner whenever the key was recognised, even if the request was then refused. */
    recognisedKey: Principal | null;
  }
  interface FastifyContextConfig {
    /** No authentication (the OpenAPI document). */
    public?: boolean;
  }
}

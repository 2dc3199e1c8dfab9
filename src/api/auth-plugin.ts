import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { AuthOutcome, Authenticator, Principal } from '../auth/authenticator.js';
import { ApiError } from '../errors.js';
import type { AuthLimits, FailureVerdict, KeyVerdict } from './rate-limit.js';
import type { RequestLogWriter } from './request-log-writer.js';

interface AuthPluginOptions {
  authenticator: Authenticator;
  requestLog: RequestLogWriter;
  /** The failed-authentication and per-key limits: in memory, or shared through Redis. */
  limits: AuthLimits;
}

/**
 * Authenticates every route not marked `config: { public: true }` (and unknown
 * routes, through the returned `authenticate`), in the order
 * the spec implies: an IP over its failed-authentication budget is refused
 * first (429, even with a good key, so guessing cannot go on); then the key
 * (401), the account (403), and the key's request budget (429). Every request
 * made with a recognised key is written to the request log, rejected ones too,
 * so the key is resolved even for a blocked IP. The address is the client's as
 * TRUST_PROXY resolves it (`request.ip`).
 */
export function registerAuth(
  app: FastifyInstance,
  options: AuthPluginOptions,
): {
  authenticate: onRequestHookHandler;
  /** For answers given outside Fastify's hooks (errors raised before routing). */
  logRequest: (request: FastifyRequest, reply: FastifyReply) => void;
} {
  const { limits } = options;
  const limitHeader = String(limits.requestsPerKey);

  app.decorateRequest('principal', null);
  app.decorateRequest('recognisedKey', null);

  // Every response names its request, errors and public routes included.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });

  // Callback style, not async: a cached key counted in memory is checked without allocating a promise.
  // Attached per route (all but `config.public` ones) when routes are declared, rather than tested on
  // every request.
  const authenticate: onRequestHookHandler = (request, reply, done) => {
    const outcome = options.authenticator.authenticate(presentedKey(request));
    if (outcome instanceof Promise) {
      outcome.then((o) => admit(request, reply, o, done), done);
    } else {
      admit(request, reply, outcome, done);
    }
  };
  app.addHook('onRoute', (route) => {
    if (route.config?.public) return;
    const existing = route.onRequest ? [route.onRequest].flat() : [];
    route.onRequest = [authenticate, ...existing];
  });

  /**
   * Records who called, checks the address's failed-authentication block and spends one request of
   * the key's budget (one call to the limits); calls `done` with the error to answer with, if any.
   */
  function admit(
    request: FastifyRequest,
    reply: FastifyReply,
    outcome: AuthOutcome,
    done: (error?: Error) => void,
  ): void {
    // The key is resolved even when the address is blocked, so that a refused request made with a
    // key still goes to its account's request log (the spec's rule 12); the answer is the same
    // whatever the key.
    request.recognisedKey = outcome.ok ? outcome.principal : outcome.recognised;
    if (outcome.ok) {
      const verdict = limits.checkKey(request.ip, outcome.principal.keyId);
      if (verdict instanceof Promise) {
        verdict.then((v) => done(afterKeyCheck(request, reply, outcome.principal, v)), done);
      } else {
        done(afterKeyCheck(request, reply, outcome.principal, verdict));
      }
      return;
    }
    const verdict = limits.checkFailure(request.ip, outcome.countsAsFailedAuth);
    if (verdict instanceof Promise) {
      verdict.then((v) => done(blockedError(v) ?? outcome.error), done);
    } else {
      done(blockedError(verdict) ?? outcome.error);
    }
  }

  function afterKeyCheck(
    request: FastifyRequest,
    reply: FastifyReply,
    principal: Principal,
    verdict: KeyVerdict,
  ): ApiError | undefined {
    if (verdict.blocked) return blockedError(verdict);
    reply.header('x-ratelimit-limit', limitHeader);
    reply.header('x-ratelimit-remaining', String(verdict.remaining));
    reply.header('x-ratelimit-reset', String(verdict.retryAfterSeconds));
    if (!verdict.allowed) {
      const message = `Rate limit of ${limits.requestsPerKey} requests per minute exceeded.`;
      return new ApiError('rate_limited', message, { retryAfterSeconds: verdict.retryAfterSeconds });
    }
    request.principal = principal;
    return undefined;
  }

  /** Writes a request made with a recognised key to the request log, whatever its answer. */
  const logRequest = (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.recognisedKey;
    if (key) {
      options.requestLog.add({
        accountId: key.accountId,
        apiKeyId: key.keyId,
        requestId: String(reply.getHeader('x-request-id') ?? request.id),
        method: request.method,
        path: request.url.slice(0, 2048),
        statusCode: reply.statusCode,
        errorCode: request.errorCode,
        ip: request.ip,
        userAgent: request.headers['user-agent']?.slice(0, 512) ?? null,
        durationMs: reply.elapsedTime,
        createdAtMs: Date.now(),
      });
    }
  };
  app.addHook('onResponse', (request, reply, done) => {
    logRequest(request, reply);
    done();
  });
  return { authenticate, logRequest };
}

/** The refusal of an address over its failed-authentication limit, whatever key it sent. */
function blockedError(verdict: FailureVerdict | KeyVerdict): ApiError | undefined {
  if (!verdict.blocked) return undefined;
  const message = 'Too many failed authentication attempts from this address. Try again later.';
  return new ApiError('rate_limited', message, { retryAfterSeconds: verdict.retryAfterSeconds });
}

/** `Authorization: Bearer <key>` or `x-api-key: <key>`; anything else present is passed on to fail as malformed. */
function presentedKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match ? match[1] : authorization;
  }
  const header = request.headers['x-api-key'];
  return Array.isArray(header) ? header[0] : header;
}

/** The authenticated caller of a route that is not public. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error('route reached without authentication');
  return request.principal;
}

declare module 'fastify' {
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

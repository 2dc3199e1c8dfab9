import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { AuthOutcome, Authenticator, Principal } from '../auth/authenticator.js';
import { ApiError } from '../errors.js';
import { FixedWindowCounter } from './rate-limit.js';
import type { RequestLogWriter } from './request-log-writer.js';

/** The spec's limit on failed authentications: 20 per minute per IP. */
const FAILED_AUTH_LIMIT_PER_MINUTE = 20;

interface AuthPluginOptions {
  authenticator: Authenticator;
  requestLog: RequestLogWriter;
  requestsPerMinutePerKey: number;
}

/**
 * Authenticates every route not marked `config: { public: true }` (and unknown
 * routes, through the returned `authenticate`), in the order
 * the spec implies: an IP over its failed-authentication budget is refused
 * first (429, even with a good key, so guessing cannot go on); then the key
 * (401), the account (403), and the key's request budget (429). Every request
 * made with a recognised key is written to the request log, rejected ones too,
 * so the key is resolved even for a blocked IP.
 */
export function registerAuth(
  app: FastifyInstance,
  options: AuthPluginOptions,
): {
  authenticate: onRequestHookHandler;
  /** For answers given outside Fastify's hooks (errors raised before routing). */
  logRequest: (request: FastifyRequest, reply: FastifyReply) => void;
} {
  const failedAuth = new FixedWindowCounter(FAILED_AUTH_LIMIT_PER_MINUTE);
  const perKey = new FixedWindowCounter(options.requestsPerMinutePerKey);
  const limitHeader = String(perKey.limit);

  app.decorateRequest('principal', null);
  app.decorateRequest('recognisedKey', null);

  // Every response names its request, errors and public routes included.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });

  // Callback style, not async: a cached key is checked without allocating a promise. Attached per route
  // (all but `config.public` ones) when routes are declared, rather than tested on every request.
  const authenticate: onRequestHookHandler = (request, reply, done) => {
    const outcome = options.authenticator.authenticate(presentedKey(request));
    if (outcome instanceof Promise) {
      outcome.then((o) => done(admit(request, reply, o)), done);
    } else {
      done(admit(request, reply, outcome));
    }
  };
  app.addHook('onRoute', (route) => {
    if (route.config?.public) return;
    const existing = route.onRequest ? [route.onRequest].flat() : [];
    route.onRequest = [authenticate, ...existing];
  });

  /** Records who called, spends one request of the key's budget; returns the error to answer with, if any. */
  function admit(request: FastifyRequest, reply: FastifyReply, outcome: AuthOutcome): ApiError | undefined {
    const blocked = failedAuth.exhausted(request.ip);
    if (blocked.exhausted) {
      // The key was resolved all the same, so that a refused request made with a key still goes to
      // its account's request log (the spec's rule 12); the answer is the same whatever the key.
      request.recognisedKey = outcome.ok ? outcome.principal : outcome.recognised;
      return new ApiError(
        'rate_limited',
        'Too many failed authentication attempts from this address. Try again later.',
        { retryAfterSeconds: blocked.retryAfterSeconds },
      );
    }
    if (!outcome.ok) {
      request.recognisedKey = outcome.recognised;
      if (outcome.countsAsFailedAuth) failedAuth.hit(request.ip);
      return outcome.error;
    }
    request.recognisedKey = outcome.principal;
    const budget = perKey.hit(outcome.principal.keyId);
    reply.header('x-ratelimit-limit', limitHeader);
    reply.header('x-ratelimit-remaining', String(budget.remaining));
    reply.header('x-ratelimit-reset', String(budget.retryAfterSeconds));
    if (!budget.allowed) {
      return new ApiError('rate_limited', `Rate limit of ${perKey.limit} requests per minute exceeded.`, {
        retryAfterSeconds: budget.retryAfterSeconds,
      });
    }
    request.principal = outcome.principal;
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

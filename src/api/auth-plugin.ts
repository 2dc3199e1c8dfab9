import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { AuthOutcome, Authenticator, PresentedKey, Principal } from '../auth/authenticator.js';
import { ApiError } from '../errors.js';
import { failedAuthSubject } from '../auth/failed-auth-subject.js';
import {
  FixedWindowCounter,
  type AuthLimits,
  type FailureVerdict,
  type KeyVerdict,
} from '../auth/rate-limit.js';
import type { RequestLogWriter } from '../db/request-log-writer.js';

interface AuthPluginOptions {
  authenticator: Authenticator;
  requestLog: RequestLogWriter;
  /** The failed-authentication and per-key limits: in memory, or shared through Redis. */
  limits: AuthLimits;
  failedAuth: {
    /** IPv6 clients are counted by their network of this many bits (FAILED_AUTH_IPV6_PREFIX). */
    ipv6PrefixLength: number;
    /** Failed lookups this process allows per minute, all clients together (FAILED_AUTH_PROCESS_PER_MINUTE). */
    perProcessPerMinute: number;
  };
}

/**
 * Authenticates every route not marked `config: { public: true }` (and unknown
 * routes, through the returned `authenticate`), in the order
 * the spec implies: an IP over its failed-authentication budget is refused
 * first (429, even with a good key, so guessing cannot go on); then the key
 * (401), the account (403), and the key's request budget (429). Every request
 * made with a recognised key is written to the request log, rejected ones too,
 * so the key is resolved even for a blocked IP. The address is the client's as
 * TRUST_PROXY resolves it (`request.ip`); an IPv6 client is counted by its /64
 * (see failedAuthSubject). Beyond the per-address limit, the process has a
 * budget of failed lookups per minute, all clients together: spent, a key that
 * would need a query and has not worked lately is refused (429) unasked, so
 * that addresses spread over many networks cannot make every guess a query.
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
  const { ipv6PrefixLength } = options.failedAuth;
  /** This process's failed lookups, under one key: the window is the whole process's. */
  const processFailures = new FixedWindowCounter(options.failedAuth.perProcessPerMinute);

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
    const budget = processFailures.exhausted('process');
    const outcome = options.authenticator.authenticate(
      presentedKey(request),
      budget.exhausted ? budgetSpentError(budget.retryAfterSeconds) : undefined,
    );
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
    const subject = failedAuthSubject(request.ip, ipv6PrefixLength);
    if (outcome.ok) {
      const verdict = limits.checkKey(subject, outcome.principal.keyId);
      if (verdict instanceof Promise) {
        verdict.then((v) => done(afterKeyCheck(request, reply, outcome.principal, v)), done);
      } else {
        done(afterKeyCheck(request, reply, outcome.principal, verdict));
      }
      return;
    }
    if (outcome.lookedUp && outcome.countsAsFailedAuth) processFailures.hit('process');
    const verdict = limits.checkFailure(subject, outcome.countsAsFailedAuth);
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

/** The refusal of a key lookup while the process's failed-authentication budget is spent. */
function budgetSpentError(retryAfterSeconds: number): ApiError {
  const message = 'Too many failed authentication attempts on this server. Try again later.';
  return new ApiError('rate_limited', message, { retryAfterSeconds });
}

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

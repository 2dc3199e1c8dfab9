import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthOutcome } from '../auth/authenticator.js';
import { failedAuthSubject } from '../auth/failed-auth-subject.js';
import {
  FixedWindowCounter,
  keyRateLimitRefusal,
  type AuthLimits,
  type FailureVerdict,
  type KeyVerdict,
} from '../auth/rate-limit.js';
import { ApiError } from '../errors.js';

export interface LimitsPluginOptions {
  /** The failed-authentication and per-key limits: in memory, or shared through Redis. */
  limits: AuthLimits;
  failedAuth: {
    /** IPv6 clients are counted by their network of this many bits (FAILED_AUTH_IPV6_PREFIX). */
    ipv6PrefixLength: number;
    /** Failed lookups this process allows per minute, all clients together (FAILED_AUTH_PROCESS_PER_MINUTE). */
    perProcessPerMinute: number;
  };
}

/** The limits a caller meets, as the auth plugin asks them (`app.callerLimits`). */
export interface CallerLimits {
  /** Set while this process's budget of failed lookups is spent: the refusal of a key that would need a query. */
  lookupRefusal(): ApiError | undefined;
  /**
   * Judges an authenticated (or refused) request against the limits. A failed authentication (401)
   * from an address over its failed-authentication limit is answered 429, counting nothing; else it
   * is counted and answered 401. A key that authenticates is never refused for its address's failures
   * (the customers behind one shared address are not locked out by one client that keeps failing):
   * it meets its own request budget (429, with the x-ratelimit-* headers); a recognised key refused for
   * its account's state (403) gets that answer. Calls `done` with the error to answer with, if any.
   */
  judge(
    request: FastifyRequest,
    reply: FastifyReply,
    outcome: AuthOutcome,
    done: (error?: Error) => void,
  ): void;
}

/**
 * The spec's 429s, decorated on the app as `callerLimits` for the auth plugin. The address is the
 * client's as TRUST_PROXY resolves it (`request.ip`); an IPv6 client is counted by its /64 (see
 * failedAuthSubject). Beyond the per-address limit, the process has a budget of failed lookups per
 * minute, all clients together: spent, a key that would need a query and has not worked lately is
 * refused (429) unasked, so that addresses spread over many networks cannot make every guess a query.
 */
export const limitsPlugin = fp<LimitsPluginOptions>(
  (app, options, registered) => {
    const { limits } = options;
    const limitHeader = String(limits.requestsPerKey);
    const { ipv6PrefixLength } = options.failedAuth;
    /** This process's failed lookups, under one key: the window is the whole process's. */
    const processFailures = new FixedWindowCounter(options.failedAuth.perProcessPerMinute);

    const afterKeyCheck = (reply: FastifyReply, verdict: KeyVerdict): ApiError | undefined => {
      reply.header('x-ratelimit-limit', limitHeader);
      reply.header('x-ratelimit-remaining', String(verdict.remaining));
      reply.header('x-ratelimit-reset', String(verdict.retryAfterSeconds));
      return keyRateLimitRefusal(limits.requestsPerKey, verdict);
    };

    const callerLimits: CallerLimits = {
      lookupRefusal() {
        const budget = processFailures.exhausted('process');
        return budget.exhausted ? budgetSpentError(budget.retryAfterSeconds) : undefined;
      },
      // One call to the limits per request; callback style, so that limits counted in memory
      // answer without allocating a promise.
      judge(request, reply, outcome, done) {
        if (outcome.ok) {
          const verdict = limits.checkKey(outcome.principal.keyId);
          if (verdict instanceof Promise) verdict.then((v) => done(afterKeyCheck(reply, v)), done);
          else done(afterKeyCheck(reply, verdict));
          return;
        }
        // Not a failed authentication (an account's 403, a lookup refused for the process's budget).
        if (!outcome.countsAsFailedAuth) return done(outcome.error);
        if (outcome.lookedUp) processFailures.hit('process');
        const verdict = limits.checkFailure(failedAuthSubject(request.ip, ipv6PrefixLength));
        if (verdict instanceof Promise) verdict.then((v) => done(blockedError(v) ?? outcome.error), done);
        else done(blockedError(verdict) ?? outcome.error);
      },
    };
    app.decorate('callerLimits', callerLimits);
    registered();
  },
  { name: 'api-limits', fastify: '5.x' },
);

/** The refusal of a failed authentication from an address over its limit. */
function blockedError(verdict: FailureVerdict): ApiError | undefined {
  if (!verdict.blocked) return undefined;
  const message = 'Too many failed authentication attempts from this address. Try again later.';
  return new ApiError('rate_limited', message, { retryAfterSeconds: verdict.retryAfterSeconds });
}

/** The refusal of a key lookup while the process's failed-authentication budget is spent. */
function budgetSpentError(retryAfterSeconds: number): ApiError {
  const message = 'Too many failed authentication attempts on this server. Try again later.';
  return new ApiError('rate_limited', message, { retryAfterSeconds });
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The spec's limits on callers (limitsPlugin). */
    callerLimits: CallerLimits;
  }
}

import { hash } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../vocabulary/errors.js';
import { findAccessTokenPrincipal } from '../db/oauth-grants-repository.js';
import { judgeKeyPrincipal, type AuthOutcome } from './authenticator.js';
import { MCP_SCOPE } from './oauth-resource.js';
import { RecentHashes } from './recent-hashes.js';

/** The shape of an access token the console's authorization server issues: 43 base64url characters. */
const tokenPattern = /^[A-Za-z0-9_-]{43}$/;
/** Hashes of tokens that worked, remembered for the budget's sake (see authenticate) this long. */
const knownGoodTtlMs = 24 * 60 * 60_000;
/** Most hashes each memory holds: bounded whatever an attacker sends. */
const maxRemembered = 100_000;

/**
 * A token that is valid but was not granted the `mcp` scope: the MCP endpoint answers it 403 with
 * `WWW-Authenticate: Bearer error="insufficient_scope"` (mcp-routes.ts). A 403 of the API's table
 * underneath, should anything else ever answer it (tokens are taken on the MCP route alone).
 */
export class InsufficientScopeError extends ApiError {
  constructor() {
    super(
      'api_access_disabled',
      `This access token was not granted the "${MCP_SCOPE}" scope: connect the app again, approving access to the MCP tools.`,
    );
  }
}

/**
 * Resolves OAuth access tokens (issued by the console's authorization server for the MCP URL) to
 * the key row of their grant, judged as a key is (revoked, access disabled, no paid purchase), and
 * holds them to their scope (`mcp`). A token is looked up by its SHA-256 in PostgreSQL on every
 * request, one indexed query: a token that worked is never remembered as working, so a revoked
 * grant (its tokens deleted) or a reused refresh token (the grant revoked) fails on the very next
 * request, with no wait for a change notification. Made-up tokens meet what made-up keys meet (see
 * Authenticator): one PostgreSQL does not know is remembered as unknown for `unknownTtlMs`
 * (UNKNOWN_KEY_CACHE_MS; a token is stored before it is handed out, so none can become known
 * later), and while the process's failed-lookup budget is spent, a token that has not worked lately
 * is refused unasked. Only for the MCP route: the REST API takes API keys alone.
 */
export class OAuthTokenAuthenticator {
  /** Hashes PostgreSQL did not know, lately. */
  private readonly unknown: RecentHashes;
  /** Hashes of tokens that authenticated lately: their lookups go on while the budget is spent. */
  private readonly knownGood = new RecentHashes(knownGoodTtlMs, maxRemembered);

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly resource: string,
    options: { unknownTtlMs?: number } = {},
  ) {
    this.unknown = new RecentHashes(options.unknownTtlMs ?? 0, maxRemembered);
  }

  /** Whether a presented bearer value has the shape of an access token (else it is judged as a key). */
  static looksLikeToken(value: string): boolean {
    return tokenPattern.test(value);
  }

  /**
   * Checks a presented token: synchronous when no query is needed (an unknown one remembered, or
   * one refused for the spent budget), a promise when PostgreSQL is asked. `refuseLookup`: the
   * answer for a token that would have to be looked up while the process's failed-authentication
   * budget is spent.
   */
  authenticate(token: string, refuseLookup?: ApiError): AuthOutcome | Promise<AuthOutcome> {
    const tokenHash = hash('sha256', token, 'hex');
    if (this.unknown.has(tokenHash)) return unknownToken(false);
    if (refuseLookup && !this.knownGood.has(tokenHash))
      return { ok: false, error: refuseLookup, countsAsFailedAuth: false, recognised: null, lookedUp: false };
    return this.lookUp(tokenHash);
  }

  private async lookUp(tokenHash: string): Promise<AuthOutcome> {
    const found = await findAccessTokenPrincipal(this.db, tokenHash, this.resource);
    if (!found) {
      this.unknown.add(tokenHash);
      return unknownToken(true);
    }
    const outcome = judgeKeyPrincipal(found);
    if (outcome.ok) this.knownGood.add(tokenHash);
    // Its scope before its account's state (which the tools answer in words): a token without
    // `mcp` may not use them at all. A revoked one is a 401 all the same.
    if (found.scope.split(' ').includes(MCP_SCOPE) || (!outcome.ok && outcome.countsAsFailedAuth))
      return outcome;
    return {
      ok: false,
      error: new InsufficientScopeError(),
      countsAsFailedAuth: false,
      recognised: outcome.ok ? outcome.principal : outcome.recognised,
      lookedUp: true,
    };
  }
}

function unknownToken(lookedUp: boolean): AuthOutcome {
  return {
    ok: false,
    error: new ApiError(
      'unauthorized',
      'Unknown or expired access token: connect the app again, or send an API key.',
    ),
    countsAsFailedAuth: true,
    recognised: null,
    lookedUp,
  };
}

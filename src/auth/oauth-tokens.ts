import { hash } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../errors.js';
import { findAccessTokenPrincipal } from '../db/oauth-grants-repository.js';
import { judgeKeyPrincipal, type AuthOutcome } from './authenticator.js';

/** The shape of an access token the console's authorization server issues: 43 base64url characters. */
const tokenPattern = /^[A-Za-z0-9_-]{43}$/;
/** Tokens remembered at most (only ones that may call; bounded whatever is sent). */
const maxRemembered = 10_000;

/**
 * Resolves OAuth access tokens (issued by the console's authorization server for the MCP URL) to
 * the key row of their grant, judged as a key is (revoked, access disabled, no paid purchase). A
 * token is looked up by its SHA-256 in PostgreSQL; one that may call is remembered for `ttlMs` at
 * most and never past its own expiry, and everything remembered is dropped whenever PostgreSQL
 * announces a change to keys (a revoked grant revokes its key row), so a revoked grant fails on its
 * very next request. Only for the MCP route: the REST API takes API keys alone.
 */
export class OAuthTokenAuthenticator {
  private readonly remembered = new Map<string, { outcome: AuthOutcome; until: number }>();

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly options: { resource: string; ttlMs: number; cacheEnabled: () => boolean },
  ) {}

  /** Whether a presented bearer value has the shape of an access token (else it is judged as a key). */
  static looksLikeToken(value: string): boolean {
    return tokenPattern.test(value);
  }

  invalidateAll(): void {
    this.remembered.clear();
  }

  authenticate(token: string): AuthOutcome | Promise<AuthOutcome> {
    if (!tokenPattern.test(token)) return unknownToken();
    const tokenHash = hash('sha256', token, 'hex');
    const cached = this.remembered.get(tokenHash);
    if (cached && cached.until > Date.now() && this.options.cacheEnabled()) return cached.outcome;
    if (cached) this.remembered.delete(tokenHash);
    return this.lookUp(tokenHash);
  }

  private async lookUp(tokenHash: string): Promise<AuthOutcome> {
    const found = await findAccessTokenPrincipal(this.db, tokenHash, this.options.resource);
    if (!found) return unknownToken();
    const outcome = judgeKeyPrincipal(found);
    if (outcome.ok && this.options.cacheEnabled() && this.options.ttlMs > 0) {
      if (this.remembered.size >= maxRemembered) this.remembered.clear();
      const until = Date.now() + Math.min(this.options.ttlMs, found.expires_in_ms);
      this.remembered.set(tokenHash, { outcome, until });
    }
    return outcome;
  }
}

function unknownToken(): AuthOutcome {
  return {
    ok: false,
    error: new ApiError(
      'unauthorized',
      'Unknown or expired access token: sign in again through your app, or send an API key.',
    ),
    countsAsFailedAuth: true,
    recognised: null,
    lookedUp: true,
  };
}

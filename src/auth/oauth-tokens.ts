import { hash } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../errors.js';
import { findAccessTokenPrincipal } from '../db/oauth-grants-repository.js';
import { judgeKeyPrincipal, type AuthOutcome } from './authenticator.js';

/** The shape of an access token the console's authorization server issues: 43 base64url characters. */
const tokenPattern = /^[A-Za-z0-9_-]{43}$/;

/**
 * Resolves OAuth access tokens (issued by the console's authorization server for the MCP URL) to
 * the key row of their grant, judged as a key is (revoked, access disabled, no paid purchase). A
 * token is looked up by its SHA-256 in PostgreSQL on every request, one indexed query: nothing is
 * remembered, so a revoked grant (its tokens deleted) or a reused refresh token (the grant
 * revoked) fails on the very next request, with no wait for a change notification. Only for the
 * MCP route: the REST API takes API keys alone.
 */
export class OAuthTokenAuthenticator {
  constructor(
    private readonly db: CommonQueryMethods,
    private readonly resource: string,
  ) {}

  /** Whether a presented bearer value has the shape of an access token (else it is judged as a key). */
  static looksLikeToken(value: string): boolean {
    return tokenPattern.test(value);
  }

  async authenticate(token: string): Promise<AuthOutcome> {
    const found = await findAccessTokenPrincipal(this.db, hash('sha256', token, 'hex'), this.resource);
    return found ? judgeKeyPrincipal(found) : unknownToken();
  }
}

function unknownToken(): AuthOutcome {
  return {
    ok: false,
    error: new ApiError(
      'unauthorized',
      'Unknown or expired access token: connect the app again, or send an API key.',
    ),
    countsAsFailedAuth: true,
    recognised: null,
    lookedUp: true,
  };
}

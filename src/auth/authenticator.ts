import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../errors.js';
import { findKeyPrincipal, type KeyPrincipal } from '../db/api-keys-repository.js';
import { InvalidatedCache } from '../invalidated-cache.js';
import { hashApiKey, isWellFormedApiKey } from './api-key.js';

/** Who is calling: the result of a successful authentication. */
export interface Principal {
  keyId: string;
  accountId: string;
}

/** The outcome of checking a presented key. `keyId`/`accountId` are set whenever the key was recognised. */
export type AuthOutcome =
  | { ok: true; principal: Principal }
  | { ok: false; error: ApiError; countsAsFailedAuth: boolean; recognised: Principal | null };

/**
 * Resolves API keys to accounts. Keys that may call are cached, and the whole
 * cache is dropped whenever PostgreSQL announces a change to keys, accounts
 * or purchases (`invalidateAll`), so a revoked key fails on its very next
 * request while an active key costs one hash and one map lookup. A refusal is
 * never cached: fixing its cause (a purchase, restored access) works at once.
 */
export class Authenticator {
  /** Outcomes by key hash; only keys that may call are kept, so a hit is a ready `ok` outcome. */
  private readonly cache: InvalidatedCache<string, AuthOutcome>;

  constructor(
    private readonly db: CommonQueryMethods,
    options: { ttlMs: number; cacheEnabled: () => boolean },
  ) {
    this.cache = new InvalidatedCache({ ttlMs: options.ttlMs, enabled: options.cacheEnabled });
  }

  invalidateAll(): void {
    this.cache.invalidateAll();
  }

  /**
   * Checks a presented key. Synchronous when the key is cached (the common
   * case), a promise when PostgreSQL has to be asked.
   */
  authenticate(presented: string | undefined): AuthOutcome | Promise<AuthOutcome> {
    if (presented === undefined) {
      return failure('Missing API key. Send Authorization: Bearer <API_KEY> or x-api-key: <API_KEY>.');
    }
    if (!isWellFormedApiKey(presented)) return failure('Malformed API key.');
    const hash = hashApiKey(presented);
    return (
      this.cache.peek(hash) ??
      this.cache.get(
        hash,
        async (h) => judgeKeyPrincipal(await findKeyPrincipal(this.db, h)),
        (o) => o.ok,
      )
    );
  }
}

/**
 * The one rule for whether a key may act (unknown, revoked, access disabled, no paid purchase),
 * shared by the API and the console's sessions.
 */
export function judgeKeyPrincipal(principal: KeyPrincipal | null): AuthOutcome {
  if (!principal) return failure('Unknown API key.');
  const recognised = { keyId: principal.key_id, accountId: principal.account_id };
  if (principal.revoked) return failure('This API key has been revoked.', recognised);
  if (!principal.api_access_enabled) {
    return denied(
      new ApiError('api_access_disabled', 'API access is disabled for this account.'),
      recognised,
    );
  }
  if (!principal.paid) {
    return denied(
      new ApiError('payment_required', 'API access needs a completed credit-pack or subscription purchase.'),
      recognised,
    );
  }
  return { ok: true, principal: recognised };
}

function failure(message: string, recognised: Principal | null = null): AuthOutcome {
  return { ok: false, error: new ApiError('unauthorized', message), countsAsFailedAuth: true, recognised };
}

function denied(error: ApiError, recognised: Principal): AuthOutcome {
  return { ok: false, error, countsAsFailedAuth: false, recognised };
}

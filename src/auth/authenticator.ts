import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../errors.js';
import { findKeyPrincipal, type KeyPrincipal } from '../db/api-keys-repository.js';
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

interface CacheEntry {
  principal: KeyPrincipal;
  expiresAt: number;
}

/**
 * Resolves API keys to accounts. Resolved keys are cached for `ttlMs`, and the
 * whole cache is dropped whenever PostgreSQL announces a change to keys,
 * accounts or purchases (see `invalidateAll`), so a revoked key fails on its
 * very next request while an active key costs one hash and one map lookup.
 * While the change feed is down (`cacheEnabled` false) every request asks the
 * database.
 */
export class Authenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private generation = 0;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly options: { ttlMs: number; cacheEnabled: () => boolean; maxEntries?: number },
  ) {}

  invalidateAll(): void {
    this.generation += 1;
    this.cache.clear();
  }

  async authenticate(presented: string | undefined): Promise<AuthOutcome> {
    if (presented === undefined) {
      return failure('Missing API key. Send Authorization: Bearer <API_KEY> or x-api-key: <API_KEY>.');
    }
    if (!isWellFormedApiKey(presented)) return failure('Malformed API key.');
    const principal = await this.lookup(hashApiKey(presented));
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
        new ApiError(
          'payment_required',
          'API access needs a completed credit-pack or subscription purchase.',
        ),
        recognised,
      );
    }
    return { ok: true, principal: recognised };
  }

  private async lookup(hash: string): Promise<KeyPrincipal | null> {
    const useCache = this.options.ttlMs > 0 && this.options.cacheEnabled();
    if (useCache) {
      const hit = this.cache.get(hash);
      if (hit && hit.expiresAt > Date.now()) return hit.principal;
    }
    const generation = this.generation;
    const principal = await findKeyPrincipal(this.db, hash);
    // Only keys that may call are cached: a refusal is re-checked each time, so fixing its cause (a purchase,
    // restored access) works at once. An invalidation that arrived while we were reading may describe a newer
    // state than we read: then nothing is cached.
    const mayCall = principal && !principal.revoked && principal.api_access_enabled && principal.paid;
    if (mayCall && useCache && generation === this.generation) {
      if (this.cache.size >= (this.options.maxEntries ?? 100_000)) this.cache.clear();
      this.cache.set(hash, { principal, expiresAt: Date.now() + this.options.ttlMs });
    }
    return principal;
  }
}

function failure(message: string, recognised: Principal | null = null): AuthOutcome {
  return { ok: false, error: new ApiError('unauthorized', message), countsAsFailedAuth: true, recognised };
}

function denied(error: ApiError, recognised: Principal): AuthOutcome {
  return { ok: false, error, countsAsFailedAuth: false, recognised };
}

import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../vocabulary/errors.js';
import { findKeyPrincipal, type KeyPrincipal } from '../db/api-keys-repository.js';
import { InvalidatedCache } from '../caches/invalidated-cache.js';
import { API_KEY_LENGTH, API_KEY_PREFIX, hashApiKey, isWellFormedApiKey } from './api-key.js';
import { RecentHashes } from './recent-hashes.js';

/** Who is calling: the result of a successful authentication. */
export interface Principal {
  keyId: string;
  accountId: string;
  /** The key's own rules (migration 0034): read-only keys may read, stream and quote only. */
  access: 'full' | 'read_only';
  /** The models the key may use; null: all. */
  models: readonly string[] | null;
}

/**
 * The outcome of checking a presented key. `recognised` is set whenever the key was recognised;
 * `lookedUp`: PostgreSQL was asked (what the per-process failed-authentication budget counts).
 */
export type AuthOutcome =
  | { ok: true; principal: Principal }
  | {
      ok: false;
      error: ApiError;
      countsAsFailedAuth: boolean;
      recognised: Principal | null;
      lookedUp: boolean;
    };

/** What a request presented: a key, or a credential in a form the API does not take (`problem` says why). */
export type PresentedKey = { key: string } | { problem: string } | undefined;

const malformed = `Malformed API key: expected ${API_KEY_PREFIX} followed by ${API_KEY_LENGTH - API_KEY_PREFIX.length} letters and digits (${API_KEY_LENGTH} characters).`;
/** Hashes of keys that worked, remembered for the budget's sake (see authenticate) this long. */
const knownGoodTtlMs = 24 * 60 * 60_000;
/** Most hashes each memory holds: bounded whatever an attacker sends. */
const maxRemembered = 100_000;

/**
 * Resolves API keys to accounts. Keys that may call are cached, and the whole
 * cache is dropped whenever PostgreSQL announces a change to keys, accounts
 * or purchases (`invalidateAll`), so a revoked key fails on its very next
 * request while an active key costs one hash and one map lookup. A refusal is
 * never cached, except that a key PostgreSQL does not know at all is
 * remembered as unknown for `unknownKeyTtlMs` (UNKNOWN_KEY_CACHE_MS), so that
 * one guessed key sent again and again costs one query: fixing a refusal's
 * cause (a purchase, restored access) works at once.
 */
export class Authenticator {
  /** Outcomes by key hash; only keys that may call are kept, so a hit is a ready `ok` outcome. */
  private readonly cache: InvalidatedCache<string, AuthOutcome>;
  /** Hashes PostgreSQL did not know, lately. */
  private readonly unknown: RecentHashes;
  /** Hashes of keys that authenticated lately: their lookups go on while the budget is spent. */
  private readonly knownGood = new RecentHashes(knownGoodTtlMs, maxRemembered);
  private epoch = 0;

  constructor(
    private readonly db: CommonQueryMethods,
    options: { ttlMs: number; cacheEnabled: () => boolean; unknownKeyTtlMs?: number },
  ) {
    this.cache = new InvalidatedCache({ ttlMs: options.ttlMs, enabled: options.cacheEnabled });
    this.unknown = new RecentHashes(options.unknownKeyTtlMs ?? 0, maxRemembered);
  }

  invalidateAll(): void {
    this.epoch += 1;
    this.cache.invalidateAll();
    this.unknown.clear(); // a key created just now is not unknown any more
  }

  /**
   * Checks a presented key. Synchronous when no query is needed (a cached key, an unknown one
   * remembered, a malformed one), a promise when PostgreSQL has to be asked. `refuseLookup`: the
   * answer for a key that would have to be looked up while the process's failed-authentication
   * budget is spent; a key that worked lately is looked up all the same, so that its owner is not
   * locked out by someone else's guessing.
   */
  authenticate(presented: PresentedKey, refuseLookup?: ApiError): AuthOutcome | Promise<AuthOutcome> {
    if (presented === undefined) {
      return failure('Missing API key. Send Authorization: Bearer <API_KEY> or x-api-key: <API_KEY>.');
    }
    if ('problem' in presented) return failure(presented.problem);
    if (!isWellFormedApiKey(presented.key)) return failure(malformed);
    const hash = hashApiKey(presented.key);
    const cached = this.cache.peek(hash);
    if (cached) return cached;
    if (this.unknown.has(hash)) return failure('Unknown API key.');
    if (refuseLookup && !this.knownGood.has(hash))
      return { ok: false, error: refuseLookup, countsAsFailedAuth: false, recognised: null, lookedUp: false };
    return this.lookUp(hash);
  }

  private async lookUp(hash: string): Promise<AuthOutcome> {
    const epoch = this.epoch;
    const outcome = await this.cache.get(
      hash,
      async (h) => judgeKeyPrincipal(await findKeyPrincipal(this.db, h)),
      (o) => o.ok,
    );
    if (outcome.ok) this.knownGood.add(hash);
    // Remembered only if no change was announced meanwhile (the key may have been created since).
    else if (outcome.recognised === null && epoch === this.epoch) this.unknown.add(hash);
    return outcome;
  }
}

/**
 * The one rule for whether a key may act (unknown, revoked, access disabled, no paid purchase),
 * shared by the API and the console's sessions.
 */
export function judgeKeyPrincipal(principal: KeyPrincipal | null): AuthOutcome {
  if (!principal) return failure('Unknown API key.', null, true);
  const recognised: Principal = {
    keyId: principal.key_id,
    accountId: principal.account_id,
    access: principal.access,
    models: principal.models,
  };
  if (principal.revoked) return failure('This API key has been revoked.', recognised, true);
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

function failure(message: string, recognised: Principal | null = null, lookedUp = false): AuthOutcome {
  return {
    ok: false,
    error: new ApiError('unauthorized', message),
    countsAsFailedAuth: true,
    recognised,
    lookedUp,
  };
}

function denied(error: ApiError, recognised: Principal): AuthOutcome {
  return { ok: false, error, countsAsFailedAuth: false, recognised, lookedUp: true };
}

import type { CommonQueryMethods } from 'slonik';
import type { Authenticator, Principal } from '../auth/authenticator.js';
import { judgeKeyPrincipal } from '../auth/authenticator.js';
import {
  CONSOLE_SESSION_IDLE_MS,
  endSession,
  openSession,
  redeemSignInLink,
  touchSession,
} from '../db/console-sessions.js';
import type { AuthLimits, KeyVerdict } from '../auth/rate-limit.js';
import { newSecret, secretHash } from './session-ids.js';

/** Who a console page acts for: the account, through the key its session was opened with. */
export interface ConsoleUser {
  accountId: string;
  keyId: string;
  /** The key's own rules (Principal): the playground holds to them as the API does. */
  access: Principal['access'];
  models: Principal['models'];
  /** The cookie's plaintext session id, from which the CSRF token is derived. */
  sessionId: string;
}

/** A session that may act, or why not (in words for the sign-in page). */
export type Resumed = { ok: true; user: ConsoleUser } | { ok: false; reason: string | null };

export type SignIn =
  | { ok: true; sessionId: string }
  | { ok: false; status: number; message: string; retryAfterSeconds?: number };

/** Idle sessions end after this long: 12 hours. */
export const SESSION_IDLE_MS = CONSOLE_SESSION_IDLE_MS;

/**
 * Opens, resumes and ends console sessions. A pasted key is judged exactly as the API judges it
 * (the Authenticator), and failures count against the API's failed-authentication limit (the same
 * AuthLimits, shared through Redis when REDIS_URL is set). A session is judged again on every
 * request from its key and account as they stand, so a revoked key or disabled access ends it at once.
 */
export class ConsoleSessions {
  constructor(
    private readonly deps: {
      db: CommonQueryMethods;
      authenticator: Authenticator;
      limits: AuthLimits;
      idleMs?: number;
    },
  ) {}

  /**
   * `subject` is whom the failed-authentication limit counts (the client's address, or its IPv6
   * network: RouteDeps.clientSubject). A key is judged as the API would answer it: a good one signs
   * in unless past its own rate limit, on which the sign-in counts as a request, whatever others failed
   * from its address; a failed attempt from a subject over its limit is refused (429).
   */
  async signInWithKey(presented: string, subject: string): Promise<SignIn> {
    const outcome = await this.deps.authenticator.authenticate({ key: presented.trim() });
    if (outcome.ok) {
      const refused = refusalOf(await this.deps.limits.checkKey(outcome.principal.keyId), this.deps.limits);
      return refused ?? this.open(outcome.principal.accountId, outcome.principal.keyId);
    }
    if (outcome.countsAsFailedAuth) {
      const verdict = await this.deps.limits.checkFailure(subject);
      if (verdict.blocked) return blocked(verdict.retryAfterSeconds);
    }
    return { ok: false, status: outcome.error.status, message: outcome.error.message };
  }

  /**
   * A one-time link (admin console-link): used once, then its key is judged like a pasted one: a
   * link that works signs in whatever others failed from its subject, an unknown, used or expired one
   * is a failed attempt (429 from a subject over its limit). A link refused by its key's rate limit is
   * not used up (the redemption is rolled back).
   */
  async signInWithLink(token: string, subject: string): Promise<SignIn> {
    const redeemed = await this.deps.db
      .transaction(async (tx) => {
        const link = await redeemSignInLink(tx, secretHash(token));
        if (!link) return null;
        const refused = refusalOf(await this.deps.limits.checkKey(link.apiKeyId), this.deps.limits);
        if (refused) throw new LinkRefused(refused);
        return link;
      })
      .catch((error: unknown) => {
        if (error instanceof LinkRefused) return error.refusal;
        throw error;
      });
    if (redeemed === null) {
      const verdict = await this.deps.limits.checkFailure(subject);
      if (verdict.blocked) return blocked(verdict.retryAfterSeconds);
      return { ok: false, status: 401, message: 'This sign-in link is unknown, used or expired.' };
    }
    if ('ok' in redeemed) return redeemed;
    return this.open(redeemed.accountId, redeemed.apiKeyId);
  }

  async resume(sessionId: string | undefined): Promise<Resumed> {
    if (!sessionId) return { ok: false, reason: null };
    const found = await touchSession(this.deps.db, secretHash(sessionId), this.idleMs);
    if (!found) return { ok: false, reason: 'Your session has ended. Sign in again.' };
    const judged = judgeKeyPrincipal(found);
    if (!judged.ok) {
      await endSession(this.deps.db, secretHash(sessionId));
      return { ok: false, reason: `Your session has ended: ${judged.error.message}` };
    }
    return { ok: true, user: { ...judged.principal, sessionId } };
  }

  async signOut(sessionId: string): Promise<void> {
    await endSession(this.deps.db, secretHash(sessionId));
  }

  private get idleMs(): number {
    return this.deps.idleMs ?? SESSION_IDLE_MS;
  }

  /** Opens a session, then judges it as every later request will: a revoked key opens nothing. */
  private async open(accountId: string, apiKeyId: string): Promise<SignIn> {
    const sessionId = newSecret();
    await openSession(this.deps.db, { idSha256: secretHash(sessionId), accountId, apiKeyId });
    const resumed = await this.resume(sessionId);
    if (!resumed.ok) return { ok: false, status: 403, message: resumed.reason ?? 'Sign-in refused.' };
    return { ok: true, sessionId };
  }
}

/** The limiter's verdict on a good key, as a refusal (429), or null when it may sign in. */
function refusalOf(verdict: KeyVerdict, limits: AuthLimits): SignIn | null {
  if (verdict.allowed) return null;
  return {
    ok: false,
    status: 429,
    message: `This key has made more than ${limits.requestsPerKey} requests in the last minute (the API's rate limit). Try again in ${verdict.retryAfterSeconds} s.`,
    retryAfterSeconds: verdict.retryAfterSeconds,
  };
}

function blocked(retryAfterSeconds: number): SignIn {
  return {
    ok: false,
    status: 429,
    message: `Too many failed sign-in attempts from this address. Try again in ${retryAfterSeconds} s.`,
    retryAfterSeconds,
  };
}

/** Rolls back a link's redemption when its key may not sign in now. */
class LinkRefused extends Error {
  constructor(readonly refusal: SignIn) {
    super('sign-in link refused by the rate limit');
  }
}

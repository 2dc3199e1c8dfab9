import type { CommonQueryMethods } from 'slonik';
import type { Authenticator } from '../auth/authenticator.js';
import { judgeKeyPrincipal } from '../auth/authenticator.js';
import {
  CONSOLE_SESSION_IDLE_MS,
  endSession,
  openSession,
  redeemSignInLink,
  touchSession,
} from '../db/console-sessions.js';
import type { AuthLimits } from '../api/rate-limit.js';
import { newSecret, secretHash } from './session-ids.js';

/** Who a console page acts for: the account, through the key its session was opened with. */
export interface ConsoleUser {
  accountId: string;
  keyId: string;
  /** The cookie's plaintext session id, from which the CSRF token is derived. */
  sessionId: string;
}

/** A session that may act, or why not (in words for the sign-in page). */
export type Resumed = { ok: true; user: ConsoleUser } | { ok: false; reason: string | null };

export type SignIn = { ok: true; sessionId: string } | { ok: false; status: number; message: string };

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

  async signInWithKey(presented: string, ip: string): Promise<SignIn> {
    const outcome = await this.deps.authenticator.authenticate({ key: presented.trim() });
    if (outcome.ok) {
      const verdict = await this.deps.limits.checkKey(ip, outcome.principal.keyId);
      if (verdict.blocked) return tooMany();
      return this.open(outcome.principal.accountId, outcome.principal.keyId);
    }
    const verdict = await this.deps.limits.checkFailure(ip, outcome.countsAsFailedAuth);
    if (verdict.blocked) return tooMany();
    return { ok: false, status: outcome.error.status, message: outcome.error.message };
  }

  /** A one-time link (admin console-link): used once, then its key is judged like a pasted one. */
  async signInWithLink(token: string, ip: string): Promise<SignIn> {
    const link = await redeemSignInLink(this.deps.db, secretHash(token));
    if (!link) {
      const verdict = await this.deps.limits.checkFailure(ip, true);
      if (verdict.blocked) return tooMany();
      return { ok: false, status: 401, message: 'This sign-in link is unknown, used or expired.' };
    }
    return this.open(link.accountId, link.apiKeyId);
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

function tooMany(): SignIn {
  return {
    ok: false,
    status: 429,
    message: 'Too many failed sign-in attempts from this address. Try again in a minute.',
  };
}

import { createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Secrets the console hands the browser: session ids and sign-in link tokens are 256 random bits
 * (base64url), stored only as their SHA-256; a form's CSRF token is an HMAC of the session id, so
 * it needs no storage and is worthless without the cookie it belongs to.
 */

export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function secretHash(secret: string): string {
  return hash('sha256', secret, 'hex');
}

export function csrfTokenFor(sessionId: string): string {
  return createHmac('sha256', sessionId).update('console-form').digest('base64url');
}

/** Constant-time comparison of two tokens. */
export function sameToken(expected: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

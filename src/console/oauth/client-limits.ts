import type { IncomingMessage } from 'node:http';
import { errors } from 'oidc-provider';
import { FixedWindowCounter } from '../../auth/rate-limit.js';

/**
 * The authorization server's open doors, limited per client address: Dynamic Client Registration
 * (open, as the MCP specification expects: each registration stores a row) and the fetch of a
 * Client ID Metadata Document (an outbound GET on demand, for any `client_id` URL an unauthenticated
 * request names). Counted in this console process's memory, in fixed windows, by the address
 * TRUST_PROXY resolves (an IPv6 client by its network, as failed sign-ins are counted).
 */
export class OAuthClientLimits {
  private readonly registrations: FixedWindowCounter;
  private readonly metadataFetches: FixedWindowCounter;

  constructor(limits: { registrationsPerHour: number; metadataFetchesPerMinute: number }) {
    this.registrations = new FixedWindowCounter(limits.registrationsPerHour, 3_600_000);
    this.metadataFetches = new FixedWindowCounter(limits.metadataFetchesPerMinute, 60_000);
  }

  /** One registration from `subject`: null when within the limit, else the refusal (429). */
  registration(subject: string): TooManyRequests | null {
    const verdict = this.registrations.hit(subject);
    return verdict.allowed
      ? null
      : new TooManyRequests(
          `too many client registrations from this address: at most ${this.registrations.limit} an hour`,
          verdict.retryAfterSeconds,
        );
  }

  /** One metadata document fetched for `subject`: null when within the limit, else the refusal (429). */
  metadataFetch(subject: string): TooManyRequests | null {
    const verdict = this.metadataFetches.hit(subject);
    return verdict.allowed
      ? null
      : new TooManyRequests(
          `too many client metadata documents fetched for this address: at most ${this.metadataFetches.limit} a minute`,
          verdict.retryAfterSeconds,
        );
  }
}

/**
 * 429 in OAuth's error shape (`{"error": "too_many_requests", "error_description": …}`, the code the
 * MCP SDK's own authorization server answers with), with when to try again.
 */
export class TooManyRequests extends errors.OIDCProviderError {
  constructor(
    description: string,
    readonly retryAfterSeconds: number,
  ) {
    super(429, 'too_many_requests');
    this.error_description = description;
  }
}

/** Whom the limits count for a request handed to oidc-provider (set by mount.ts, read in its hooks). */
const subjects = new WeakMap<IncomingMessage, string>();

export function setClientSubject(request: IncomingMessage, subject: string): void {
  subjects.set(request, subject);
}

export function clientSubjectOf(request: IncomingMessage | undefined): string {
  return (request && subjects.get(request)) ?? 'unknown';
}

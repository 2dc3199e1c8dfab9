import type http from 'node:http';
import { sendJson } from './fake-http.js';

/**
 * What a provider fake counts of the requests it receives, by kind, and the request-rate limits it
 * may enforce as the provider publishes them: Replicate allows an account 600 creates and 3,000
 * requests to all other endpoints a minute (https://replicate.com/docs/topics/predictions/rate-limits)
 * and answers 429 with Retry-After past them; fal publishes a concurrency limit, not a rate, so its
 * fake has none unless asked. Windows slide: a request is refused while the last `windowMs` hold
 * `limit` accepted requests of its class, and counted as throttled, not as accepted.
 */

/** Result files are never limited: the providers serve them from file hosts, not their APIs. */
export type RequestKind = 'create' | 'status' | 'result' | 'cancel' | 'file' | 'other';

export const requestKinds: readonly RequestKind[] = ['create', 'status', 'result', 'cancel', 'file', 'other'];

export interface RateLimits {
  /** Creates accepted per window (absent: no limit). */
  createsPerMinute?: number;
  /** Every other request to the API (files excluded) per window (absent: no limit). */
  requestsPerMinute?: number;
  /** The window's length (default 60 s: "a minute"), shorter in a test. */
  windowMs?: number;
}

/** Replicate's published limits. */
export const replicateLimits: RateLimits = { createsPerMinute: 600, requestsPerMinute: 3_000 };

/** Times of the requests accepted in the last window, oldest first. */
class SlidingWindow {
  private times: number[] = [];
  private head = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  /** Takes a place now, or says how many ms until one frees. */
  take(now: number): { ok: true } | { ok: false; waitMs: number } {
    while (this.head < this.times.length && this.times[this.head]! <= now - this.windowMs) this.head++;
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
    if (this.times.length - this.head < this.limit) {
      this.times.push(now);
      return { ok: true };
    }
    return { ok: false, waitMs: this.times[this.head]! + this.windowMs - now };
  }
}

export class RequestLimiter {
  /** Requests received by kind, answered or refused. */
  readonly counts: Record<RequestKind, number> = zero();
  /** Of those, the ones refused with 429. */
  readonly throttled: Record<RequestKind, number> = zero();
  private readonly creates: SlidingWindow | undefined;
  private readonly others: SlidingWindow | undefined;

  constructor(
    private readonly kindOf: (method: string, path: string) => RequestKind,
    limits: RateLimits | undefined,
    /** The provider's body for a 429 with this Retry-After (seconds). */
    private readonly throttledBody: (retryAfterSeconds: number) => unknown,
    private readonly now: () => number = Date.now,
  ) {
    const windowMs = limits?.windowMs ?? 60_000;
    if (limits?.createsPerMinute !== undefined)
      this.creates = new SlidingWindow(limits.createsPerMinute, windowMs);
    if (limits?.requestsPerMinute !== undefined)
      this.others = new SlidingWindow(limits.requestsPerMinute, windowMs);
  }

  /** Counts the request; past a limit, answers it 429 with Retry-After and returns true. */
  refuses(request: http.IncomingMessage, response: http.ServerResponse): boolean {
    const kind = this.kindOf(request.method ?? 'GET', (request.url ?? '/').split('?')[0]!);
    this.counts[kind]++;
    if (kind === 'file') return false;
    const turn = (kind === 'create' ? this.creates : this.others)?.take(this.now());
    if (!turn || turn.ok) return false;
    this.throttled[kind]++;
    const retryAfter = Math.max(1, Math.ceil(turn.waitMs / 1000));
    sendJson(response, 429, this.throttledBody(retryAfter), { 'retry-after': String(retryAfter) });
    return true;
  }
}

function zero(): Record<RequestKind, number> {
  return { create: 0, status: 0, result: 0, cancel: 0, file: 0, other: 0 };
}

/** Replicate's API by path: creates, a prediction's read and cancel; the rest (account, lists, secret) is `other`. */
export function replicateRequestKind(method: string, path: string): RequestKind {
  if (method === 'GET' && path.startsWith('/files/')) return 'file';
  if (method === 'POST' && path.endsWith('/predictions')) return 'create';
  if (method === 'POST' && /^\/v1\/predictions\/[^/]+\/cancel$/.test(path)) return 'cancel';
  if (method === 'GET' && /^\/v1\/predictions\/[^/]+$/.test(path)) return 'status';
  return 'other';
}

/** fal's queue by path: the submit, a request's status, result and cancel; the rest (JWKS, …) is `other`. */
export function falRequestKind(method: string, path: string): RequestKind {
  if (method === 'GET' && path.startsWith('/files/')) return 'file';
  const request = /^\/[^/]+\/[^/]+\/requests\/[^/]+(\/status|\/cancel)?$/.exec(path);
  if (request?.[1] === '/status' && method === 'GET') return 'status';
  if (request?.[1] === '/cancel' && method === 'PUT') return 'cancel';
  if (request && !request[1] && method === 'GET') return 'result';
  if (!request && method === 'POST' && path.split('/').length >= 3) return 'create';
  return 'other';
}

/** Replicate's answer past its limits (its problem details, as it words them). */
export const replicateThrottled = (retryAfter: number) => ({
  title: 'Request was throttled.',
  detail: `Request was throttled. Expected available in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`,
  status: 429,
});

/** fal's answer to a request it refuses for rate (its `{ detail }` shape). */
export const falThrottled = () => ({ detail: 'Rate limit exceeded' });

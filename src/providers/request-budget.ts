import { setTimeout as sleep } from 'node:timers/promises';
import { notAccepted, ProviderThrottled } from './provider.js';

/**
 * The request budget of a provider account (issue 47): our own requests to a provider's API, counted
 * by every worker together against the limits the provider publishes, so that we pace ourselves
 * instead of collecting its 429s. Two allowances per account, as Replicate counts them: creates, and
 * every other request (status and result reads, cancels, probes).
 *
 * Each allowance is a GCRA schedule (a leaky bucket kept as one timestamp, the "theoretical arrival
 * time"), held where every worker sees it (Redis, or PostgreSQL: see the stores): a request takes the
 * next turn, and waits until it comes. The pace is set so that **no 60-second window, however it is
 * placed, holds more than the limit**: a burst of a tenth of the limit, then `limit - burst` a minute
 * (Replicate's 600 creates: 60 at once, then 9 a second). Whether the provider counts fixed or sliding
 * minutes, we stay under it.
 *
 * Who gives way (Priority):
 * - `fallback`: a status read while a webhook is expected (the least urgent: the push will tell)
 *   goes only while the allowance's backlog is under `fallbackShare` of its burst; else it is
 *   skipped at once, nothing sent (BudgetSkipped), and the job is answered still running;
 * - `read`: pushed reads, results, cancels, probes wait their turn, up to `readWaitMs`;
 * - `create`: waits up to `createWaitMs`, then fails as a throttled create that proves the job was
 *   not accepted (nothing was sent), as a provider's 429 would: the submit retries it later. A
 *   create that names its job (the job's token) keeps the turn it was given, up to
 *   `createReservationMs` ahead, and is told to come back exactly then (Retry-After): its next
 *   attempt on this worker goes at once, without asking again. A backlog of creates is thus served
 *   in order, each coming back once, rather than all of them asking again every second. (An attempt
 *   that lands on another worker asks afresh: the kept turn goes unused, which only slows us.)
 *
 * A provider's `429` pauses the whole account for its Retry-After, for every worker (the store's
 * pause); fallback reads stay paused twice as long, so that they do not come back first.
 */

/** What a request to a provider's API is for, as the budget counts it. */
export type RequestKind = 'create' | 'status' | 'result' | 'cancel' | 'probe';
/** A provider account's two allowances. */
export type BudgetClass = 'create' | 'other';
/** Who gives way first: see above. */
export type Priority = 'fallback' | 'read' | 'create';

export interface BudgetLimits {
  /** Creates per minute, by every worker together (0: no budget). */
  createsPerMinute: number;
  /** Every other request per minute (0: no budget). */
  requestsPerMinute: number;
}

export interface BudgetPolicy extends BudgetLimits {
  /** The share (0 to 1] of an allowance's burst that fallback reads may use. */
  fallbackShare: number;
  createWaitMs: number;
  readWaitMs: number;
}

/** An allowance's schedule: one turn every `emissionMs`, `toleranceMs` ahead of it at most (the burst). */
export interface Pace {
  emissionMs: number;
  toleranceMs: number;
}

/**
 * The pace of `perMinute` requests a minute (null: no budget): a burst of a tenth of it, then the
 * rest spread evenly, so that any 60 s hold at most `burst + (perMinute - burst)` = perMinute.
 */
export function paceOf(perMinute: number): Pace | null {
  if (!(perMinute > 0)) return null;
  const burst = Math.max(1, Math.floor(perMinute / 10));
  const emissionMs = 60_000 / Math.max(1, perMinute - burst);
  return { emissionMs, toleranceMs: (burst - 1) * emissionMs };
}

/** One request asking its turn. */
export interface TurnAsk {
  provider: string;
  budgetClass: BudgetClass;
  /** null: the allowance has no limit (only a 429's pause applies). */
  pace: Pace | null;
  /** How long the request may wait for its turn; a longer wait is refused, and nothing is taken. */
  maxWaitMs: number;
  /** A fallback read: never waits, and goes only while the backlog is under this share of the burst. */
  fallbackShare?: number;
}

/** Granted: go after `waitMs` (the turn is taken). Refused: nothing taken; a turn could come in `retryAfterMs`. */
export type TurnAnswer = { granted: true; waitMs: number } | { granted: false; retryAfterMs: number };

/**
 * Where the schedules and pauses are kept. Every call is one round trip at most (a Redis script, a
 * PostgreSQL function); neither rejects: a store that cannot be reached answers from this process's
 * memory meanwhile (and says so in the log), since a budget must never stop the provider calls.
 */
export interface BudgetStore {
  take(ask: TurnAsk): Promise<TurnAnswer>;
  /** A provider answered 429: every worker's calls to it wait `ms` (fallback reads twice that). */
  pause(provider: string, ms: number): Promise<void>;
  close(): Promise<void>;
}

/** What the budget counts (the worker's metrics: see observability/metrics.ts). */
export interface BudgetMetrics {
  /** A request let through to the provider. */
  sent(provider: string, kind: RequestKind): void;
  /** A request that waited for its turn (or for a 429's pause), `ms` long. */
  waited(provider: string, kind: RequestKind, ms: number): void;
  /** A request refused past its wait: failed as throttled, nothing sent. */
  refused(provider: string, kind: RequestKind): void;
  /** A fallback read skipped, nothing sent. */
  skipped(provider: string): void;
  /** A 429 received. */
  throttled(provider: string, kind: RequestKind): void;
}

export const noBudgetMetrics: BudgetMetrics = {
  sent: () => undefined,
  waited: () => undefined,
  refused: () => undefined,
  skipped: () => undefined,
  throttled: () => undefined,
};

/** A fallback read the budget skipped: nothing was sent (see budgetProvider: answered still running). */
export class BudgetSkipped extends Error {
  override readonly name = 'BudgetSkipped';
}

/** How far ahead a refused create may keep its turn (see above). */
export const createReservationMs = 60_000;

/** One provider account's budget, as a worker uses it. */
export class ProviderBudget {
  private readonly paces: Record<BudgetClass, Pace | null>;
  /** The turns kept by creates refused past their wait: job token → when the turn comes (ms since the epoch). */
  private readonly keptTurns = new Map<string, number>();

  constructor(
    readonly provider: string,
    private readonly store: BudgetStore,
    readonly policy: BudgetPolicy,
    private readonly metrics: BudgetMetrics = noBudgetMetrics,
  ) {
    this.paces = { create: paceOf(policy.createsPerMinute), other: paceOf(policy.requestsPerMinute) };
  }

  /**
   * A turn for one request of `kind`: resolves when it may be sent (after waiting its turn), or
   * throws BudgetSkipped (a fallback read) or ProviderThrottled (past its wait; for a create, one
   * that proves the job not accepted).
   */
  async turn(kind: RequestKind, priority: Priority, job?: string): Promise<void> {
    const budgetClass: BudgetClass = kind === 'create' ? 'create' : 'other';
    const fallback = priority === 'fallback';
    const maxWaitMs = fallback
      ? 0
      : priority === 'create'
        ? this.policy.createWaitMs
        : this.policy.readWaitMs;
    const keeper = kind === 'create' ? job : undefined;
    const kept = keeper === undefined ? undefined : this.keptTurns.get(keeper);
    if (keeper !== undefined && kept !== undefined) {
      // This create kept its turn when it was refused: it goes when the turn comes, asking nothing.
      const waitMs = kept - Date.now();
      if (waitMs > maxWaitMs) throw this.refusal(kind, waitMs);
      this.keptTurns.delete(keeper);
      return this.go(kind, waitMs);
    }
    const answer = await this.store.take({
      provider: this.provider,
      budgetClass,
      pace: this.paces[budgetClass],
      maxWaitMs: keeper === undefined ? maxWaitMs : Math.max(maxWaitMs, createReservationMs),
      ...(fallback ? { fallbackShare: this.policy.fallbackShare } : {}),
    });
    if (answer.granted) {
      if (keeper === undefined || answer.waitMs <= maxWaitMs) return this.go(kind, answer.waitMs);
      this.keep(keeper, Date.now() + answer.waitMs);
      throw this.refusal(kind, answer.waitMs);
    }
    if (fallback) {
      this.metrics.skipped(this.provider);
      throw new BudgetSkipped(`${this.provider}: a fallback read gives way to the request budget`);
    }
    throw this.refusal(kind, answer.retryAfterMs);
  }

  private async go(kind: RequestKind, waitMs: number): Promise<void> {
    if (waitMs > 0) {
      this.metrics.waited(this.provider, kind, waitMs);
      await sleep(waitMs);
    }
    this.metrics.sent(this.provider, kind);
  }

  /** A create's turn kept until `at`; turns kept long past their time (their create never came back) are let go. */
  private keep(job: string, at: number): void {
    const now = Date.now();
    for (const [other, otherAt] of this.keptTurns)
      if (otherAt < now - createReservationMs) this.keptTurns.delete(other);
    this.keptTurns.set(job, at);
  }

  /** A request with no turn within its wait: throttled, nothing sent (a create: proven not accepted). */
  private refusal(kind: RequestKind, retryAfterMs: number): ProviderThrottled {
    this.metrics.refused(this.provider, kind);
    const create = kind === 'create';
    const limit = create ? this.policy.createsPerMinute : this.policy.requestsPerMinute;
    const error = new ProviderThrottled(
      `${this.provider}: our request budget (${limit > 0 ? `${limit} ${create ? 'creates' : 'requests'} a minute` : 'a 429 pause'}) has no turn for this ${kind} within ${
        create ? this.policy.createWaitMs : this.policy.readWaitMs
      } ms; nothing was sent`,
      Math.max(100, Math.ceil(retryAfterMs)),
    );
    return create ? notAccepted(error) : error;
  }

  /** The provider answered 429 to a request of `kind`: the account pauses for every worker. */
  async throttled(kind: RequestKind, retryAfterMs: number): Promise<void> {
    this.metrics.throttled(this.provider, kind);
    if (retryAfterMs > 0) await this.store.pause(this.provider, retryAfterMs);
  }
}

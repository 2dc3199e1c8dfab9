import type { BudgetStore, TurnAnswer, TurnAsk } from './request-budget.js';

interface Pause {
  /** Every call waits until then. */
  all: number;
  /** Fallback reads until then (twice the Retry-After). */
  fallback: number;
}

/**
 * The budget's rule, on one allowance's schedule: the same arithmetic as the Redis script and the
 * PostgreSQL function (the stores' tests hold all three to it). `turn` is the allowance's
 * theoretical arrival time (ms, 0 when none yet); `paused` the pause this request heeds. Returns the
 * answer, and the new turn when one was taken.
 */
export function decideTurn(
  ask: TurnAsk,
  now: number,
  turn: number,
  paused: number,
): { answer: TurnAnswer; nextTurn?: number } {
  const fallback = ask.fallbackShare !== undefined;
  if (fallback && paused > now) return { answer: { granted: false, retryAfterMs: paused - now } };
  const start = Math.max(now, paused);
  if (!ask.pace) {
    const wait = start - now;
    return {
      answer: wait > ask.maxWaitMs ? { granted: false, retryAfterMs: wait } : { granted: true, waitMs: wait },
    };
  }
  const { emissionMs, toleranceMs } = ask.pace;
  const at = Math.max(turn, start);
  const wait = Math.max(at - toleranceMs, start) - now;
  if (fallback) {
    const over = at + emissionMs - now - ask.fallbackShare! * (toleranceMs + emissionMs);
    // A microsecond of slack: the arithmetic in floating point must not refuse a read exactly at the share.
    if (over > 0.001) return { answer: { granted: false, retryAfterMs: over } };
  } else if (wait > ask.maxWaitMs) return { answer: { granted: false, retryAfterMs: wait } };
  return { answer: { granted: true, waitMs: wait }, nextTurn: at + emissionMs };
}

/**
 * The budget kept in this process's memory: for a worker alone, and what the shared stores answer
 * from while Redis or PostgreSQL cannot be reached (each worker then paces itself alone).
 */
export class MemoryBudgetStore implements BudgetStore {
  private readonly turns = new Map<string, number>();
  private readonly pauses = new Map<string, Pause>();

  constructor(private readonly now: () => number = Date.now) {}

  take(ask: TurnAsk): Promise<TurnAnswer> {
    return Promise.resolve(this.takeNow(ask));
  }

  takeNow(ask: TurnAsk): TurnAnswer {
    const now = this.now();
    const key = `${ask.provider}:${ask.budgetClass}`;
    const pause = this.pauses.get(ask.provider);
    const paused = (ask.fallbackShare !== undefined ? pause?.fallback : pause?.all) ?? 0;
    const { answer, nextTurn } = decideTurn(ask, now, this.turns.get(key) ?? 0, paused);
    if (nextTurn !== undefined) this.turns.set(key, nextTurn);
    return answer;
  }

  pause(provider: string, ms: number): Promise<void> {
    const now = this.now();
    const pause = this.pauses.get(provider) ?? { all: 0, fallback: 0 };
    this.pauses.set(provider, {
      all: Math.max(pause.all, now + ms),
      fallback: Math.max(pause.fallback, now + 2 * ms),
    });
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

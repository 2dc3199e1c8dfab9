import type { Logger } from 'pino';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { MemoryBudgetStore } from './budget-memory-store.js';
import type { BudgetStore, TurnAnswer, TurnAsk } from './request-budget.js';

const turnRow = z.object({ granted: z.boolean(), wait_ms: z.number() });

/** While PostgreSQL fails, a warning at most this often. */
const warnEveryMs = 60_000;

/**
 * The providers' request budgets kept in PostgreSQL (table provider_budgets, migration 0037), for
 * workers without REDIS_URL: one call of take_provider_turn() per request, a single short
 * statement holding the account's row for the time of its arithmetic. Should it fail (the
 * database is away), the turn is answered from this process's memory and a warning is logged: a
 * budget never stops a provider call of its own.
 */
export class PostgresBudgetStore implements BudgetStore {
  private readonly local = new MemoryBudgetStore();
  private lastWarnAt = 0;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly log?: Logger,
  ) {}

  async take(ask: TurnAsk): Promise<TurnAnswer> {
    try {
      const row = await this.db.one(sql.type(turnRow)`
        SELECT granted, wait_ms FROM take_provider_turn(${ask.provider}, ${ask.budgetClass},
          ${ask.pace?.emissionMs ?? null}, ${ask.pace?.toleranceMs ?? null}, ${ask.maxWaitMs},
          ${ask.fallbackShare ?? null})`);
      const ms = Math.max(0, row.wait_ms);
      return row.granted ? { granted: true, waitMs: ms } : { granted: false, retryAfterMs: ms };
    } catch (error) {
      this.failed(error);
      return this.local.take(ask);
    }
  }

  async pause(provider: string, ms: number): Promise<void> {
    await this.local.pause(provider, ms);
    try {
      const every = sql.fragment`make_interval(secs => ${ms / 1000})`;
      const fallback = sql.fragment`make_interval(secs => ${(2 * ms) / 1000})`;
      await this.db.query(sql.unsafe`
        INSERT INTO provider_budgets AS b (provider, paused_until, fallback_paused_until)
        VALUES (${provider}, clock_timestamp() + ${every}, clock_timestamp() + ${fallback})
        ON CONFLICT (provider) DO UPDATE SET
          paused_until = greatest(b.paused_until, EXCLUDED.paused_until),
          fallback_paused_until = greatest(b.fallback_paused_until, EXCLUDED.fallback_paused_until)`);
    } catch (error) {
      this.failed(error);
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private failed(error: unknown): void {
    if (Date.now() - this.lastWarnAt < warnEveryMs) return;
    this.lastWarnAt = Date.now();
    this.log?.warn(
      { err: error },
      'provider request budget: PostgreSQL failed; this worker paces its provider calls alone meanwhile',
    );
  }
}

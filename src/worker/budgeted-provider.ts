import type { Logger } from 'pino';
import type { CommonQueryMethods } from 'slonik';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { requestBudgets, type Config } from '../config/service-config.js';
import { PostgresBudgetStore } from '../providers/budget-postgres-store.js';
import { RedisBudgetStore } from '../providers/budget-redis-store.js';
import type { Provider, ProviderStatus } from '../providers/provider.js';
import {
  BudgetSkipped,
  ProviderBudget,
  type BudgetMetrics,
  type BudgetStore,
} from '../providers/request-budget.js';
import { withBudget } from '../providers/request-turns.js';

/**
 * Wraps a provider so that every request its adapter makes (callProvider) takes its turn in the
 * account's request budget (see request-budget.ts), knowing which method runs and why a status is
 * read. Composed outside the health tracking and the metrics (worker-deps.ts): a request the budget
 * refuses or skips never reached the provider, so it says nothing of its health or its latency.
 *
 * - A create's turn is taken once the create is prepared, before the submit marks it sent: a wait
 *   that outlasts the attempt, or a refusal, leaves nothing that may have reached the provider
 *   (ProviderThrottled proving it not accepted: the submit retries, or takes the next route). A
 *   refused create keeps its turn under the job's token and is told when it comes (request-budget.ts).
 * - A read on a timer (`reason` 'fallback' while a push is expected, or 'poll' where none can come)
 *   asks for its turn first and, when it must give way, is answered `{ state: 'running', skipped: 'budget' }` with nothing sent: the caller counts it and
 *   reads again later.
 */
export function budgetProvider(provider: Provider, budget: ProviderBudget): Provider {
  return {
    submit: async (job) => {
      if (provider.submitsLocally) return withBudget(budget, 'submit', () => provider.submit(job));
      await budget.turn('create', 'create', job.token);
      return withBudget(budget, 'submit', () => provider.submit(job), { create: true });
    },
    prepare:
      provider.prepare &&
      (async (job) => {
        const { send } = await withBudget(budget, 'submit', () => provider.prepare!(job));
        await budget.turn('create', 'create', job.token);
        let held = true;
        return {
          send: () => {
            const create = held;
            held = false;
            return withBudget(budget, 'submit', send, { create });
          },
        };
      }),
    status: async (jobId, reason) => {
      // A pushed read (the job has ended) waits its turn; a read on a timer gives way, and comes again.
      if (reason !== 'fallback' && reason !== 'poll')
        return withBudget(budget, 'status', () => provider.status(jobId, reason));
      try {
        await budget.turn('status', 'fallback');
      } catch (error) {
        if (error instanceof BudgetSkipped) return skippedRead;
        throw error;
      }
      return withBudget(budget, 'status', () => provider.status(jobId, reason), { read: true });
    },
    fetchResult: (jobId, index, result) =>
      withBudget(budget, 'fetchResult', () => provider.fetchResult(jobId, index, result)),
    lookup: (token) => withBudget(budget, 'lookup', () => provider.lookup(token)),
    cancel: (jobId) => withBudget(budget, 'cancel', () => provider.cancel(jobId)),
    stopBeforeRun:
      provider.stopBeforeRun &&
      ((jobId, asked) => withBudget(budget, 'stopBeforeRun', () => provider.stopBeforeRun!(jobId, asked))),
    probe: provider.probe && (() => withBudget(budget, 'probe', () => provider.probe!())),
    submitsLocally: provider.submitsLocally,
    pushes: provider.pushes,
    pushesWithoutUrl: provider.pushesWithoutUrl,
    expectedRunMs: provider.expectedRunMs,
  };
}

/** A fallback read the budget skipped: the job is taken as still running, and read again later. */
const skippedRead: ProviderStatus = Object.freeze({ state: 'running', skipped: 'budget' } as const);

/**
 * The store every worker shares the budgets through: Redis with REDIS_URL, else PostgreSQL. A Redis
 * store connects in the background (turns are counted in memory until it is up).
 */
export function budgetStoreFor(config: Config, db: CommonQueryMethods, logger: Logger): BudgetStore {
  const log = logger.child({ component: 'provider-budget' });
  return config.REDIS_URL
    ? new RedisBudgetStore({ url: config.REDIS_URL, commandTimeoutMs: config.REDIS_TIMEOUT_MS, logger: log })
    : new PostgresBudgetStore(db, log);
}

/** Each real provider's budget, by name (the simulated provider's calls are PostgreSQL: it has none). */
export function providerBudgets(
  config: Config,
  store: BudgetStore,
  metrics?: BudgetMetrics,
): Partial<Record<ProviderName, ProviderBudget>> {
  const limits = requestBudgets(config);
  const policy = {
    fallbackShare: config.PROVIDER_BUDGET_FALLBACK_SHARE,
    createWaitMs: config.PROVIDER_BUDGET_CREATE_WAIT_MS,
    readWaitMs: config.PROVIDER_BUDGET_READ_WAIT_MS,
  };
  return Object.fromEntries(
    Object.entries(limits).map(([name, limit]) => [
      name,
      new ProviderBudget(name, store, { ...limit, ...policy }, metrics),
    ]),
  );
}

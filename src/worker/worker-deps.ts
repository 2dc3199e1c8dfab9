import type { CommonQueryMethods } from 'slonik';
import type { Logger } from 'pino';
import type { ProviderName } from '../catalog/provider-mapping.js';
import {
  inFlightCaps,
  stepHorizons,
  storageLocation,
  webhookResolverOf,
  type Config,
} from '../config/service-config.js';
import type { Provider } from '../providers/provider.js';
import { trackHealth, type HealthPolicy } from './provider-health-tracker.js';
import type { ActivityDeps } from '../activities/activity-deps.js';
import type { PruningOptions } from '../workflows/contracts/pruning.js';
import type { ReconciliationOptions } from '../workflows/contracts/reconciliation.js';
import { FalQueueProvider } from '../providers/fal/fal-queue-provider.js';
import { OpenAiImagesProvider } from '../providers/openai/openai-images-provider.js';
import { ReplicateProvider } from '../providers/replicate/replicate-provider.js';
import { ChildProcessRenderer } from '../providers/simulated/renderer.js';
import { SimulatedProvider } from '../providers/simulated/simulated-provider.js';
import { openStorage } from '../storage/open-storage.js';
import { providerRegistry } from './provider-registry.js';
import { signalSimulatedJobEnded } from './simulated-push.js';
import { measureProvider } from './provider-metrics.js';
import { budgetProvider, budgetStoreFor, providerBudgets } from './budgeted-provider.js';
import type { BudgetStore } from '../providers/request-budget.js';
import type { WorkerMetrics } from './worker-metrics.js';

/** How long after our provider-wait horizon Replicate's own deadline (Cancel-After) falls. */
const replicateDeadlineMarginMs = 15 * 60_000;

/**
 * The activities' dependencies from configuration: storage, and the providers with credentials.
 * With `metrics`, every provider call is timed and the activities count the outcomes they commit.
 * `budgetStore`: where the real providers' request budgets are shared (closed by the caller at
 * exit); by default Redis with REDIS_URL, else PostgreSQL.
 */
export function activityDeps(
  config: Config,
  db: CommonQueryMethods,
  logger: Logger,
  overrides: Partial<ActivityDeps> & Pick<ActivityDeps, 'temporal'>,
  metrics?: WorkerMetrics,
  budgetStore: BudgetStore = budgetStoreFor(config, db, logger),
): { deps: ActivityDeps; providers: ReadonlyMap<ProviderName, Provider>; budgetStore: BudgetStore } {
  const storage = openStorage(storageLocation(config), config.RESULT_BASE_URL);
  const budgets = providerBudgets(config, budgetStore, metrics?.budget);
  const healthLog = logger.child({ component: 'provider-health' });
  /** How a provider's result files are fetched: plain http only when its API is a local stand-in on http. */
  const downloadPolicy = (apiUrl: string) => ({
    allowCidrs: config.OUTBOUND_ALLOW_CIDRS,
    allowHttp: new URL(apiUrl).protocol === 'http:',
  });
  const { providerFor, providers } = providerRegistry(
    config,
    {
      simulated: () =>
        new SimulatedProvider(db, {
          delayMs: config.SIM_PROVIDER_DELAY_MS,
          renderer: new ChildProcessRenderer(),
          storage,
          frameFetch: { allowCidrs: config.OUTBOUND_ALLOW_CIDRS },
          push: signalSimulatedJobEnded(
            overrides.temporal,
            logger.child({ component: 'simulated-provider' }),
          ),
        }),
      fal: () =>
        new FalQueueProvider({
          key: config.FAL_KEY!,
          queueUrl: config.FAL_QUEUE_URL,
          storage,
          download: downloadPolicy(config.FAL_QUEUE_URL),
        }),
      openai: () =>
        new OpenAiImagesProvider(db, {
          apiKey: config.OPENAI_API_KEY!,
          baseUrl: config.OPENAI_BASE_URL,
          storage,
          download: downloadPolicy(config.OPENAI_BASE_URL),
          // Staged images must outlive the persist step that copies them.
          stagedRetentionMs: config.PERSIST_HORIZON_MS + 3_600_000,
        }),
      replicate: () =>
        new ReplicateProvider({
          apiUrl: config.REPLICATE_API_URL,
          token: config.REPLICATE_API_TOKEN!,
          storage,
          // Results come from Replicate's file host: public HTTPS, unless the API itself is a local stand-in.
          download: downloadPolicy(config.REPLICATE_API_URL),
          // Behind our own give-up: Replicate stops the prediction itself should our cancel never reach it.
          cancelAfterMs: config.PROVIDER_WAIT_HORIZON_MS + replicateDeadlineMarginMs,
        }),
    },
    // Timed inside the health tracking, so that its bookkeeping is not counted as the provider's time;
    // both inside the request budget, so that a request it holds back or skips counts for neither.
    (name, provider) => {
      const tracked = trackHealth(
        name,
        metrics ? measureProvider(name, provider, metrics.providerCalls) : provider,
        db,
        healthPolicy(config),
        healthLog,
      );
      const budget = budgets[name];
      return budget ? budgetProvider(tracked, budget) : tracked;
    },
  );
  const caps = inFlightCaps(config);
  return {
    deps: {
      db,
      providerFor,
      storage,
      inFlightCap: (name) => caps[name],
      batchProviderShare: config.BATCH_PROVIDER_SHARE,
      batchLinesPerAccount: config.BATCH_LINES_IN_FLIGHT_PER_ACCOUNT,
      submitClaimWindowMs: config.SUBMIT_CLAIM_WINDOW_MS,
      concurrencyLimit: config.CONCURRENT_GENERATIONS_PER_ACCOUNT,
      webhookDeliveriesPerAccount: config.WEBHOOK_DELIVERIES_PER_ACCOUNT,
      // Customers' image URLs are HTTPS (the API accepts no other), wherever the providers are.
      referenceImageFetch: { allowCidrs: config.OUTBOUND_ALLOW_CIDRS, allowHttp: false },
      // Webhooks have rules of their own: a customer's receiver is not an internal image mirror.
      webhookDelivery: {
        allowCidrs: config.WEBHOOK_ALLOW_CIDRS,
        allowLoopbackHttp: config.WEBHOOK_ALLOW_LOOPBACK_HTTP,
        resolve: webhookResolverOf(config).resolve,
      },
      metrics: metrics?.generations,
      ...(config.PROVIDER_WEBHOOK_BASE_URL
        ? { providerWebhookBaseUrl: config.PROVIDER_WEBHOOK_BASE_URL }
        : {}),
      fallbackReadIntervalMs: config.PROVIDER_FALLBACK_READ_INTERVAL_MS,
      ...overrides,
    },
    providers,
    budgetStore,
  };
}

/** When a provider is taken for down, and how often it is probed then. */
export function healthPolicy(config: Config): HealthPolicy {
  return {
    downAfter: config.PROVIDER_DOWN_AFTER_FAILURES,
    probeIntervalMs: config.PROVIDER_PROBE_INTERVAL_MS,
  };
}

/**
 * What the reconciliation sweep looks for: queued generations untouched for the grace period, and
 * reports one whose workflow still runs once it has been queued longer than every step's horizon.
 */
export function reconciliationOptions(config: Config): ReconciliationOptions {
  const h = stepHorizons(config);
  const total = h.admissionMs + h.submitMs + h.providerWaitMs + h.persistMs + h.bookkeepingMs;
  return { graceMs: config.RECONCILE_GRACE_MS, overdueMs: total + config.RECONCILE_GRACE_MS, limit: 200 };
}

/**
 * What each pruning run deletes (see PruningOptions). Rejected generations are kept at least as
 * long as keys: a 402 that claimed its key answers for it until the horizon.
 */
export function pruningOptions(config: Config): PruningOptions {
  const rejected = config.REJECTED_RETENTION_MS;
  return {
    batchSize: config.PRUNE_BATCH_SIZE,
    maxBatches: config.PRUNE_MAX_BATCHES,
    requestLogRetentionMs: config.REQUEST_LOG_RETENTION_MS,
    rejectedRetentionMs: rejected > 0 ? Math.max(rejected, config.IDEMPOTENCY_RETENTION_MS) : 0,
    simProviderJobRetentionMs: config.SIM_PROVIDER_JOB_RETENTION_MS,
  };
}

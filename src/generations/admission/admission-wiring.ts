import { Client, Connection } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { CatalogCache } from '../../catalog/catalog-cache.js';
import {
  providersWithCredentials,
  storageLocation,
  webhookResolverOf,
  type Config,
} from '../../config/service-config.js';
import type { NotificationListener } from '../../db/notifications.js';
import type { DatabasePool } from '../../db/pool.js';
import { ApiGenerationMetrics } from '../../observability/metrics.js';
import { openStorage } from '../../storage/open-storage.js';
import { temporalConnectionOptions } from '../../temporal/connection-options.js';
import type { AdmissionDeps } from './admit-generation.js';
import { generationTiming } from './generation-timing.js';
import { ProviderAvailability } from './provider-availability.js';
import { fastestModels, RouteDurations } from './route-durations.js';

/** Admission as a process holds it: what admitGeneration and quoteGeneration are given, and its parts. */
export interface AdmissionWiring {
  /** What every front door of this process admits and quotes through. */
  deps: AdmissionDeps;
  catalog: CatalogCache;
  /** Which providers this process holds down (pushed by NOTIFY): what new generations are refused for. */
  providers: ProviderAvailability;
  /** The routes' measured durations (the `fastest` policy), read again every minute. */
  routeDurations: RouteDurations;
  /** Lazy: the process starts, and reads work, while Temporal is away; admission answers 503 until it is back. */
  temporal: Client;
  /** Loads the catalog, the provider states and the route durations: once the listener has started. */
  start(): Promise<void>;
  /** Stops the reloads and closes the Temporal connection. */
  close(): Promise<void>;
}

/**
 * Admission wired from configuration, one way for every process that admits (the API, the
 * console): the catalog, the provider states and route durations, kept fresh by the process's
 * change feed (`listener`, which the caller starts once every part has subscribed to it), the
 * Temporal client (its spans carried into the workflow when OTEL_EXPORTER_OTLP_ENDPOINT is set),
 * the result storage, the webhook rules, and the refusals counted into `registry` when the
 * process has one.
 */
export function wireAdmission(
  config: Config,
  parts: { pool: DatabasePool; listener: NotificationListener; logger: Logger; registry?: Registry },
): AdmissionWiring {
  const { pool, listener, logger } = parts;
  const catalog = new CatalogCache(
    pool,
    logger.child({ component: 'catalog' }),
    providersWithCredentials(config),
  );
  const providers = new ProviderAvailability(pool, logger.child({ component: 'provider-health' }));
  const routeDurations = new RouteDurations(pool, logger.child({ component: 'route-durations' }), () =>
    fastestModels(catalog),
  );
  // The catalog and provider states as PostgreSQL announces their changes (the timers are the safety net).
  const reloadCatalog = () =>
    void catalog.reload().catch((error: unknown) => logger.warn({ err: error }, 'catalog reload failed'));
  listener
    .on('provider_health_changed', () => providers.reloadInBackground())
    .on('catalog_changed', reloadCatalog)
    .onReconnect(() => {
      reloadCatalog();
      providers.reloadInBackground();
    });
  const connection = Connection.lazy(temporalConnectionOptions(config.TEMPORAL_ADDRESS, config));
  const temporal = new Client({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    // A POST's trace goes into the workflow's start and update headers (see src/workflows/tracing-interceptors.ts).
    ...(config.OTEL_EXPORTER_OTLP_ENDPOINT
      ? { interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] } }
      : {}),
  });
  const deps: AdmissionDeps = {
    db: pool,
    catalog,
    providerDownFor: (provider) => providers.retryAfterSeconds(provider),
    routeP50Ms: (model, provider) => routeDurations.p50Ms(model, provider),
    // Measured only when someone can read it: no registry, no per-request cost.
    ...(parts.registry ? { metrics: new ApiGenerationMetrics(parts.registry) } : {}),
    temporal,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    storage: openStorage(storageLocation(config), config.RESULT_BASE_URL),
    admissionTimeoutMs: config.ADMISSION_TIMEOUT_MS,
    cancelAfterMinSeconds: config.CANCEL_AFTER_MIN_SECONDS,
    timing: generationTiming(config),
    webhooks: {
      allowCidrs: config.WEBHOOK_ALLOW_CIDRS,
      allowLoopbackHttp: config.WEBHOOK_ALLOW_LOOPBACK_HTTP,
      resolver: webhookResolverOf(config),
      retryDelaysMs: config.WEBHOOK_RETRY_DELAYS_MS,
    },
  };
  return {
    deps,
    catalog,
    providers,
    routeDurations,
    temporal,
    async start() {
      await catalog.start(config.CATALOG_REFRESH_MS);
      await providers.start(config.CATALOG_REFRESH_MS);
      await routeDurations.start();
    },
    async close() {
      // Before the pool ends: a reload still querying it would fail, and say so.
      await Promise.all([catalog.stop(), providers.stop(), routeDurations.stop()]);
      await connection.close();
    },
  };
}

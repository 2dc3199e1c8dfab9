import { Client, Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { failedAuthSubject } from '../auth/failed-auth-subject.js';
import { RequestLogWriter } from '../db/request-log-writer.js';
import { ProviderAvailability } from '../generations/provider-availability.js';
import { fastestModels, RouteDurations } from '../generations/route-durations.js';
import { authLimitsFor } from '../auth/auth-limits.js';
import { generationTiming } from '../generations/generation-timing.js';
import { Authenticator } from '../auth/authenticator.js';
import { CatalogCache } from '../catalog/catalog-cache.js';
import { MAX_DATA_URI_BYTES } from '../catalog/image-input.js';
import { providersWithCredentials, storageLocation, type Config } from '../config.js';
import { NotificationListener } from '../db/notifications.js';
import { createDatabasePool, type DatabasePool } from '../db/pool.js';
import { openStorage } from '../storage/open-storage.js';
import { temporalConnectionOptions } from '../temporal/connection-options.js';
import { buildConsoleApp } from './app.js';
import { ConsoleSessions } from './sessions.js';

export interface ConsoleService {
  app: FastifyInstance;
  pool: DatabasePool;
  close(): Promise<void>;
}

/**
 * Everything the console process runs, wired from the API's configuration: the same database,
 * catalog, storage, Temporal task queue, request log and failed-authentication limits (shared
 * with the API through Redis when REDIS_URL is set), so that no rule has a second copy.
 */
export async function createConsoleService(config: Config, logger: Logger): Promise<ConsoleService> {
  const pool = await createDatabasePool(config.DATABASE_URL, {
    maximumPoolSize: Math.min(5, config.DATABASE_POOL_SIZE),
  });
  const catalog = new CatalogCache(
    pool,
    logger.child({ component: 'catalog' }),
    providersWithCredentials(config),
  );
  // Which providers are down, as the API knows it: the playground refuses new generations for them alike.
  const providers = new ProviderAvailability(pool, logger.child({ component: 'provider-health' }));
  // The catalog and provider states as PostgreSQL announces their changes (the timers are the safety net).
  const reloadCatalog = () =>
    void catalog.reload().catch((error: unknown) => logger.warn({ err: error }, 'catalog reload failed'));
  const listener = new NotificationListener(config.DATABASE_URL, logger.child({ component: 'notifications' }))
    .on('provider_health_changed', () => providers.reloadInBackground())
    .on('catalog_changed', reloadCatalog)
    .onReconnect(() => {
      reloadCatalog();
      providers.reloadInBackground();
    });
  await listener.start();
  await catalog.start(config.CATALOG_REFRESH_MS);
  await providers.start(config.CATALOG_REFRESH_MS);
  // The `fastest` policy's measures, as the API holds them: the playground plans routes alike.
  const routeDurations = new RouteDurations(pool, logger.child({ component: 'route-durations' }), () =>
    fastestModels(catalog),
  );
  await routeDurations.start();
  // No key cache: sign-ins are rare, and each is judged from PostgreSQL as it stands.
  const authenticator = new Authenticator(pool, { ttlMs: 0, cacheEnabled: () => false });
  const limits = await authLimitsFor(config, logger);
  const temporalConnection = Connection.lazy(temporalConnectionOptions(config.TEMPORAL_ADDRESS, config));
  const temporal = new Client({ connection: temporalConnection, namespace: config.TEMPORAL_NAMESPACE });
  const storage = openStorage(storageLocation(config), config.RESULT_BASE_URL);
  const requestLog = new RequestLogWriter(config.DATABASE_URL, logger.child({ component: 'request-log' }));
  const app = await buildConsoleApp({
    logger,
    db: pool,
    sessions: new ConsoleSessions({ db: pool, authenticator, limits }),
    limits,
    clientSubject: (request) => failedAuthSubject(request.ip, config.FAILED_AUTH_IPV6_PREFIX),
    trustProxy: config.TRUST_PROXY,
    catalog,
    storage,
    temporal,
    requestLog,
    publicUrl: config.CONSOLE_PUBLIC_URL,
    resultBaseUrl: config.RESULT_BASE_URL,
    // The API's own limits: a body of BODY_LIMIT_BYTES, an image of a data URI's 10 MiB (16 images
    // at most: no model takes more), and the form's text fields well above any prompt.
    uploadLimits: {
      totalBytes: config.BODY_LIMIT_BYTES,
      fileBytes: MAX_DATA_URI_BYTES,
      files: 16,
      fields: 64,
      fieldBytes: 64 * 1024,
    },
    admission: {
      db: pool,
      catalog,
      providerDownFor: (provider) => providers.retryAfterSeconds(provider),
      routeP50Ms: (model, provider) => routeDurations.p50Ms(model, provider),
      temporal,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      storage,
      admissionTimeoutMs: config.ADMISSION_TIMEOUT_MS,
      timing: generationTiming(config),
    },
  });
  return {
    app,
    pool,
    async close() {
      await app.close();
      catalog.stop();
      providers.stop();
      routeDurations.stop();
      await listener.close();
      await requestLog.close();
      await limits.close();
      await temporalConnection.close();
      await pool.end();
    },
  };
}

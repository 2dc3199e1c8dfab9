import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Authenticator } from '../auth/authenticator.js';
import { CatalogCache } from '../catalog/catalog-cache.js';
import type { Config } from '../config.js';
import { NotificationListener } from '../db/notifications.js';
import { createDatabasePool, type DatabasePool } from '../db/pool.js';
import { buildApp } from './app.js';
import { RequestLogWriter } from './request-log-writer.js';

export interface ApiService {
  app: FastifyInstance;
  pool: DatabasePool;
  close(): Promise<void>;
}

/** Everything the API process runs, wired from configuration: pool, change feed, caches, request log, app. */
export async function createApiService(
  config: Config,
  logger: Logger,
  configure?: (app: FastifyInstance) => void,
): Promise<ApiService> {
  const pool = await createDatabasePool(config.DATABASE_URL, { maximumPoolSize: config.DATABASE_POOL_SIZE });
  const listener = new NotificationListener(
    config.DATABASE_URL,
    logger.child({ component: 'notifications' }),
  );
  const authenticator = new Authenticator(pool, {
    ttlMs: config.AUTH_CACHE_TTL_MS,
    cacheEnabled: () => listener.listening,
  });
  const catalog = new CatalogCache(pool, logger.child({ component: 'catalog' }));
  listener
    .on('auth_changed', () => authenticator.invalidateAll())
    .on(
      'catalog_changed',
      () =>
        void catalog.reload().catch((error: unknown) => logger.warn({ err: error }, 'catalog reload failed')),
    )
    .onReconnect(() => {
      authenticator.invalidateAll();
      void catalog.reload().catch(() => undefined);
    });
  await listener.start();
  await catalog.start(config.CATALOG_REFRESH_MS);
  const requestLog = new RequestLogWriter(pool, logger.child({ component: 'request-log' }));
  const app = await buildApp({
    db: pool,
    logger,
    authenticator,
    catalog,
    requestLog,
    settings: {
      publicUrl: config.API_PUBLIC_URL,
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
      trustProxy: config.TRUST_PROXY,
      requestsPerMinutePerKey: config.RATE_LIMIT_PER_MINUTE,
    },
    configure,
  });
  return {
    app,
    pool,
    async close() {
      await app.close();
      catalog.stop();
      await requestLog.close();
      await listener.close();
      await pool.end();
    },
  };
}

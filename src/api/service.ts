import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Authenticator } from '../auth/authenticator.js';
import { wireAdmission } from '../generations/admission-wiring.js';
import type { ProviderAvailability } from '../generations/provider-availability.js';
import type { RouteDurations } from '../generations/route-durations.js';
import type { Config } from '../config.js';
import type { CreditBalance } from '../db/credits-repository.js';
import type { GenerationRow } from '../db/generation-reads.js';
import { InvalidatedCache } from '../invalidated-cache.js';
import { NotificationListener } from '../db/notifications.js';
import { createDatabasePool, type DatabasePool } from '../db/pool.js';
import { createMetricsRegistry } from '../observability/metrics.js';
import { startMetricsServer, type MetricsServer } from '../observability/metrics-server.js';
import { startTracing } from '../observability/tracing.js';
import { buildApp } from './app.js';
import { GenerationWaiters, maxWaitSeconds } from './generation-waiters.js';
import { RequestLogWriter } from '../db/request-log-writer.js';
import { authLimitsFor } from '../auth/auth-limits.js';
import { openEventStreams } from './event-stream-wiring.js';
import { OAuthTokenAuthenticator } from '../auth/oauth-tokens.js';
import { mcpResourceUrl } from '../auth/oauth-resource.js';
import { providerPushVerifiers } from './provider-push-verifiers.js';

export interface ApiService {
  app: FastifyInstance;
  pool: DatabasePool;
  /** The metrics port (METRICS_PORT), when one is configured. */
  metrics: MetricsServer | null;
  /** Which providers this process holds down (pushed by NOTIFY): what its POSTs are refused for. */
  providers: ProviderAvailability;
  /** The routes' measured durations (the `fastest` policy), read again every minute. */
  routeDurations: RouteDurations;
  /** The requests held by `Prefer: wait` now. */
  waiting(): number;
  /** The open event streams now. */
  streaming(): number;
  close(): Promise<void>;
}

/** Everything the API process runs, wired from configuration: pool, change feed, caches, request log, app. */
export async function createApiService(
  config: Config,
  logger: Logger,
  configure?: (app: FastifyInstance) => void,
): Promise<ApiService> {
  // First, so that the tracer provider is in place before anything starts a span.
  const tracing = config.OTEL_EXPORTER_OTLP_ENDPOINT
    ? startTracing('generation-api', config.OTEL_EXPORTER_OTLP_ENDPOINT)
    : null;
  const pool = await createDatabasePool(config.DATABASE_URL, { maximumPoolSize: config.DATABASE_POOL_SIZE });
  const listener = new NotificationListener(
    config.DATABASE_URL,
    logger.child({ component: 'notifications' }),
  );
  // Caches are trusted only while the change feed that invalidates them is connected.
  const cacheEnabled = () => listener.listening;
  const authenticator = new Authenticator(pool, {
    ttlMs: config.CACHE_TTL_MS,
    cacheEnabled,
    unknownKeyTtlMs: config.UNKNOWN_KEY_CACHE_MS,
  });
  const resource = mcpResourceUrl(config.API_PUBLIC_URL);
  // Access tokens for the MCP endpoint: looked up every time (no cache), so a revocation is immediate;
  // an unknown one is remembered as an unknown key is.
  const oauthTokens = new OAuthTokenAuthenticator(pool, resource, {
    unknownTtlMs: config.UNKNOWN_KEY_CACHE_MS,
  });
  const balances = new InvalidatedCache<string, CreditBalance>({
    ttlMs: config.CACHE_TTL_MS,
    enabled: cacheEnabled,
  });
  const generationCache = new InvalidatedCache<string, GenerationRow | null>({
    ttlMs: config.CACHE_TTL_MS,
    enabled: cacheEnabled,
  });
  const waiters = new GenerationWaiters({
    listening: () => listener.listening,
    log: logger.child({ component: 'waiters' }),
  });
  const eventStreams = openEventStreams(config, pool, listener, logger);
  // Measured only when someone can read it: no metrics port, no per-request cost.
  const registry = config.METRICS_PORT === undefined ? undefined : createMetricsRegistry();
  const admission = wireAdmission(config, { pool, listener, logger, registry });
  listener
    .on('auth_changed', () => authenticator.invalidateAll())
    .on('balance_changed', (accountId) => balances.invalidate(accountId))
    .on('generation_changed', (id) => generationCache.invalidate(id))
    // After the cache has dropped the row: the waiters' read sees the change.
    .on('generation_changed', (id) => waiters.changed(id))
    .onReconnect(() => {
      authenticator.invalidateAll();
      balances.invalidateAll();
      generationCache.invalidateAll();
      waiters.recheckAll();
    });
  await listener.start();
  await admission.start();
  const requestLog = new RequestLogWriter(config.DATABASE_URL, logger.child({ component: 'request-log' }));
  const limits = await authLimitsFor(config, logger);
  const app = await buildApp({
    db: pool,
    logger,
    authenticator,
    balances,
    requestLog,
    limits,
    failedAuth: {
      ipv6PrefixLength: config.FAILED_AUTH_IPV6_PREFIX,
      perProcessPerMinute: config.FAILED_AUTH_PROCESS_PER_MINUTE,
    },
    metrics: registry,
    tracing: tracing !== null,
    settings: {
      publicUrl: config.API_PUBLIC_URL,
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
      trustProxy: config.TRUST_PROXY,
      requestTimeoutMs: config.API_REQUEST_TIMEOUT_MS,
      headersTimeoutMs: config.API_HEADERS_TIMEOUT_MS,
      mcpWaitSeconds: config.MCP_WAIT_SECONDS,
      mcpPreviewConcurrency: config.MCP_PREVIEW_CONCURRENCY,
      mcpAllowedOrigins: config.MCP_ALLOWED_ORIGINS,
    },
    eventStreams,
    generations: {
      cache: generationCache,
      // A wait ends within the request timeout, so that the timeout never cuts a waiter off.
      waiting: {
        waiters,
        maxSeconds: Math.max(1, Math.min(maxWaitSeconds, Math.floor(config.API_REQUEST_TIMEOUT_MS / 1000))),
      },
    },
    admission: admission.deps,
    oauth: { tokens: oauthTokens, resource, issuer: config.CONSOLE_PUBLIC_URL },
    providerPushes: providerPushVerifiers(config),
    batches: {
      pool,
      maxLines: config.BATCH_MAX_LINES,
      linesInFlight: config.BATCH_LINES_IN_FLIGHT,
      historyEventsPerRun: config.BATCH_HISTORY_EVENTS_PER_RUN,
      caps: {
        openPerAccount: config.BATCH_OPEN_PER_ACCOUNT,
        queuedLinesPerAccount: config.BATCH_QUEUED_LINES_PER_ACCOUNT,
      },
      bodyLimitBytes: config.BATCH_BODY_LIMIT_BYTES,
      uploadsPerKey: config.BATCH_UPLOADS_PER_KEY,
    },
    configure,
  });
  const metrics =
    registry &&
    (await startMetricsServer({
      host: config.METRICS_HOST,
      port: config.METRICS_PORT!,
      registry,
      onError: (error) => logger.warn({ err: error }, 'metrics scrape failed'),
    }));
  return {
    app,
    pool,
    metrics: metrics ?? null,
    providers: admission.providers,
    routeDurations: admission.routeDurations,
    waiting: () => waiters.size,
    streaming: () => eventStreams.size,
    async close() {
      await metrics?.close();
      // Waiters are answered with the current state before the server waits for requests to end.
      waiters.close();
      // Streams end now, so that their clients resume (Last-Event-ID) on another process.
      eventStreams.close();
      await app.close();
      // Listeners and timers before the pool: a reload still querying an ending pool fails, and says so.
      await listener.close();
      await admission.close();
      await requestLog.close();
      await limits.close();
      await pool.end();
      await tracing?.shutdown();
    },
  };
}

import { FastifyOtelInstrumentation } from '@fastify/otel';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { CommonQueryMethods } from 'slonik';
import type { Authenticator } from '../auth/authenticator.js';
import type { TrustProxy } from '../config.js';
import type { CreditBalance } from '../db/credits-repository.js';
import type { InvalidatedCache } from '../invalidated-cache.js';
import { newId } from '../ids.js';
import { observeHttpRequests } from '../observability/http-metrics.js';
import type { Registry } from 'prom-client';
import { authPlugin } from './auth-plugin.js';
import { fastifyTrustProxy } from '../config/client-address.js';
import { errorsPlugin } from './errors-plugin.js';
import { limitsPlugin } from './limits-plugin.js';
import type { AuthLimits } from '../auth/rate-limit.js';
import type { RequestLogWriter } from '../db/request-log-writer.js';
import { refuseUnstorableText } from './storable-text-hook.js';
import { closeUnusedConnectionsOnShutdown } from '../http/unused-connections.js';
import { useZodSchemas } from './zod-type-provider.js';
import { cancelRoutes } from './routes/cancel-routes.js';
import { creditsRoutes } from './routes/credits-routes.js';
import { keyRoutes } from './routes/key-routes.js';
import type { AdmissionDeps } from '../generations/admit-generation.js';
import type { BatchCaps } from '../generations/batch-caps.js';
import { generationRoutes, type GenerationRouteDeps } from './routes/generation-routes.js';
import { modelsRoutes } from './routes/models-routes.js';
import { quoteRoutes } from './routes/quote-routes.js';
import { healthRoutes } from './routes/health-routes.js';
import { openApiRoutes } from './routes/openapi-routes.js';
import { eventRoutes } from './routes/event-routes.js';
import { webhookRoutes } from './routes/webhook-routes.js';
import { accountEventRoutes } from './routes/account-event-routes.js';
import { batchRoutes } from './routes/batch-routes.js';
import type { DatabasePool } from '../db/pool.js';
import type { EventStreams } from './event-stream-wiring.js';
import { mcpDepsOf, mcpRoutes } from './routes/mcp-routes.js';
import type { OAuthTokenAuthenticator } from '../auth/oauth-tokens.js';
import { MCP_ROUTE } from '../auth/oauth-resource.js';
import { oauthMetadataRoutes, type OAuthMetadataDeps } from './routes/oauth-metadata-routes.js';
import { providerWebhookRoutes } from './routes/provider-webhook-routes.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import type { PushVerifier } from '../providers/provider-webhooks.js';
import { ProviderWebhookMetrics } from '../observability/metrics.js';

interface AppDeps {
  db: CommonQueryMethods;
  logger: FastifyBaseLogger;
  authenticator: Authenticator;
  /** Balances by account, dropped when PostgreSQL announces a change. */
  balances: InvalidatedCache<string, CreditBalance>;
  requestLog: RequestLogWriter;
  /** The per-key and failed-authentication limits (RATE_LIMIT_PER_MINUTE; shared through Redis with REDIS_URL). */
  limits: AuthLimits;
  /** How failed authentications are counted (FAILED_AUTH_IPV6_PREFIX, FAILED_AUTH_PROCESS_PER_MINUTE). */
  failedAuth: { ipv6PrefixLength: number; perProcessPerMinute: number };
  settings: {
    publicUrl: string;
    bodyLimitBytes: number;
    trustProxy: TrustProxy;
    /** Longest a client may take to send a whole request, and its headers (see API_REQUEST_TIMEOUT_MS). */
    requestTimeoutMs: number;
    headersTimeoutMs: number;
    /** How long an MCP call waits for a generation (MCP_WAIT_SECONDS). */
    mcpWaitSeconds: number;
    /** Previews one process makes at once for MCP results (MCP_PREVIEW_CONCURRENCY; default 2). */
    mcpPreviewConcurrency?: number;
    /** Origins besides the API's own and loopback whose browsers may call /v1/mcp (MCP_ALLOWED_ORIGINS). */
    mcpAllowedOrigins: readonly string[];
  };
  /** Admission as wireAdmission made it: the POST and the quote answer through it. */
  admission: AdmissionDeps;
  generations: Omit<GenerationRouteDeps, 'db' | 'admission'>;
  /** The open event streams of this process (GET /v1/generations/{id}/events, GET /v1/events, GET /v1/batches/{id}/events). */
  eventStreams: Pick<EventStreams, 'slots' | 'generations' | 'accounts' | 'batches'>;
  /** The process's metrics registry: requests are timed into it (no registry: nothing is measured). */
  metrics?: Registry;
  /** Each request gets a server span (a tracer provider is registered: see startTracing). */
  tracing?: boolean;
  /**
   * OAuth for the MCP endpoint: its access tokens (taken there only) and its protected-resource
   * metadata naming the console as the authorization server.
   */
  oauth?: OAuthMetadataDeps & { tokens: OAuthTokenAuthenticator };
  /** Batches (POST /v1/batches and its reads): the pool their creation's transaction runs on, and their limits. */
  batches?: {
    pool: DatabasePool;
    maxLines: number;
    linesInFlight: number;
    historyEventsPerRun?: number;
    /** What an account's open batches may hold (BATCH_OPEN_PER_ACCOUNT, BATCH_QUEUED_LINES_PER_ACCOUNT). */
    caps?: BatchCaps;
    bodyLimitBytes: number;
    /** Batch uploads read at once per API key (BATCH_UPLOADS_PER_KEY). */
    uploadsPerKey: number;
  };
  /**
   * The providers whose pushes POST /provider-webhooks/{provider}/{generationId} takes, each with
   * its verification (absent: none, every delivery is 404).
   */
  providerPushes?: ReadonlyMap<ProviderName, PushVerifier>;
  /** Adds routes before the app is sealed (embedding; tests add probe routes). */
  configure?: (app: FastifyInstance) => void;
}

/**
 * Builds the API: authentication, the spec's error envelope, and one plugin
 * per resource. It starts and reads; it never changes a generation itself.
 * There is deliberately no CORS support: calls must come from a server.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    bodyLimit: deps.settings.bodyLimitBytes,
    trustProxy: fastifyTrustProxy(deps.settings.trustProxy),
    genReqId: () => newId('req'),
    // One logger for all requests instead of a child per request (a measurable cost at these rates);
    // the few lines logged per request name the request id themselves.
    childLoggerFactory: (logger) => logger,
    return503OnClosing: true,
    // Slow clients. Node enforces these timeouts when it checks its connections, every 30 s by default
    // (longer than the timeouts themselves): here every second, or more often for shorter timeouts.
    requestTimeout: deps.settings.requestTimeoutMs,
    http: {
      headersTimeout: deps.settings.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.ceil(deps.settings.headersTimeoutMs / 4)),
    },
    // Errors raised before routing (a path that is not valid percent-encoding) in the envelope too:
    // Fastify runs no hooks for them, so they are timed here.
    frameworkErrors: (error, request, reply) => {
      if (observe) reply.raw.once('finish', () => observe(request, reply));
      app.answerFrameworkError(error, request, reply);
    },
  });
  closeUnusedConnectionsOnShutdown(app);
  if (deps.tracing) await app.register(requestSpans().plugin());
  // JSON only: without this, Fastify would accept text/plain bodies as strings.
  app.removeContentTypeParser('text/plain');
  // In this order, each using what the one before decorated the app with: the limits (callerLimits),
  // authentication (authenticate, logRequest), then the error envelope and unknown routes.
  await app.register(limitsPlugin, { limits: deps.limits, failedAuth: deps.failedAuth });
  await app.register(authPlugin, {
    authenticator: deps.authenticator,
    requestLog: deps.requestLog,
    oauthTokens: deps.oauth?.tokens,
    oauthPath: MCP_ROUTE,
  });
  const observe = deps.metrics ? observeHttpRequests(app, deps.metrics) : undefined;
  await app.register(errorsPlugin);
  app.addHook('preValidation', refuseUnstorableText);

  const routes = useZodSchemas(app);
  creditsRoutes(routes, { db: deps.db, balances: deps.balances });
  keyRoutes(routes, { db: deps.db });
  modelsRoutes(routes, { catalog: deps.admission.catalog });
  generationRoutes(routes, { db: deps.db, admission: deps.admission, ...deps.generations });
  eventRoutes(routes, { db: deps.db, cache: deps.generations.cache, streams: deps.eventStreams });
  accountEventRoutes(routes, { db: deps.db, streams: deps.eventStreams });
  webhookRoutes(routes, { db: deps.db });
  quoteRoutes(routes, { db: deps.db, admission: deps.admission, balances: deps.balances });
  cancelRoutes(routes, {
    db: deps.db,
    temporal: deps.admission.temporal,
    admissionTimeoutMs: deps.admission.admissionTimeoutMs,
  });
  if (deps.batches)
    batchRoutes(app, {
      ...deps.admission,
      ...deps.batches,
      // One line of a batch is at most what a POST /v1/generations body may be.
      lineLimitBytes: deps.settings.bodyLimitBytes,
      streams: deps.eventStreams,
    });
  healthRoutes(app, {
    db: deps.db,
    temporal: deps.admission.temporal,
    taskQueue: deps.admission.taskQueue,
  });
  openApiRoutes(routes, { catalog: deps.admission.catalog, publicUrl: deps.settings.publicUrl });
  mcpRoutes(app, {
    publicUrl: deps.settings.publicUrl,
    allowedOrigins: deps.settings.mcpAllowedOrigins,
    mcp: mcpDepsOf({
      db: deps.db,
      admission: deps.admission,
      cache: deps.generations.cache,
      balances: deps.balances,
      waiting: deps.generations.waiting,
      waitSeconds: deps.settings.mcpWaitSeconds,
      previews: {
        concurrency: deps.settings.mcpPreviewConcurrency,
        registry: deps.metrics,
        log: deps.logger,
      },
    }),
  });
  if (deps.oauth) oauthMetadataRoutes(app, deps.oauth);
  providerWebhookRoutes(app, {
    db: deps.db,
    temporal: deps.admission.temporal,
    verifiers: deps.providerPushes ?? new Map(),
    timeoutMs: deps.admission.admissionTimeoutMs,
    log: deps.logger,
    ...(deps.metrics ? { metrics: new ProviderWebhookMetrics(deps.metrics) } : {}),
  });
  deps.configure?.(app);
  await app.ready();
  return app;
}

/**
 * A server span per request (continuing the caller's `traceparent`), named by method and route
 * pattern, active while the request is handled, so that the Temporal client's spans of a POST are
 * its children. @fastify/otel registers as a plugin and patches no module (no loader hook is
 * needed under ESM), and it knows Fastify's route patterns, which the generic HTTP instrumentation
 * does not. Health checks are not traced; hooks get no spans of their own.
 */
function requestSpans(): FastifyOtelInstrumentation {
  const untraced = new Set(['/healthz', '/readyz']);
  return new FastifyOtelInstrumentation({
    instrumentHooks: false,
    ignorePaths: ({ url }) => untraced.has(url.split('?')[0]!),
    requestHook: (span, request) =>
      span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched'}`),
  });
}

import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { failedAuthSubject } from '../auth/failed-auth-subject.js';
import { RequestLogWriter } from '../db/request-log-writer.js';
import { wireAdmission } from '../generations/admission/admission-wiring.js';
import { authLimitsFor } from '../auth/auth-limits.js';
import { Authenticator } from '../auth/authenticator.js';
import { MAX_DATA_URI_BYTES } from '../catalog/image-input.js';
import type { Config } from '../config/service-config.js';
import { NotificationListener } from '../db/notifications.js';
import { createDatabasePool, type DatabasePool } from '../db/pool.js';
import { buildConsoleApp } from './app.js';
import { ConsoleSessions } from './sessions.js';
import { mcpResourceUrl } from '../auth/oauth-resource.js';
import { createAuthorizationServer } from './oauth/authorization-server.js';
import { OAuthClientLimits } from './oauth/client-limits.js';

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
export async function createConsoleService(
  config: Config,
  logger: Logger,
  options: {
    /** Certificates trusted besides Node's roots when a client's metadata document is fetched (tests). */
    outboundExtraCa?: readonly string[];
  } = {},
): Promise<ConsoleService> {
  const pool = await createDatabasePool(config.DATABASE_URL, {
    maximumPoolSize: Math.min(5, config.DATABASE_POOL_SIZE),
  });
  // The API's admission, wired alike: the same catalog, provider states, route durations (the
  // playground refuses and plans routes as the API does), Temporal client, storage and webhook rules.
  const listener = new NotificationListener(
    config.DATABASE_URL,
    logger.child({ component: 'notifications' }),
  );
  const admission = wireAdmission(config, { pool, listener, logger });
  await listener.start();
  await admission.start();
  // No key cache: sign-ins are rare, and each is judged from PostgreSQL as it stands.
  const authenticator = new Authenticator(pool, { ttlMs: 0, cacheEnabled: () => false });
  const limits = await authLimitsFor(config, logger);
  // The authorization server chat apps sign in through, for the API's MCP endpoint.
  const resource = mcpResourceUrl(config.API_PUBLIC_URL);
  const oauthLimits = new OAuthClientLimits({
    registrationsPerHour: config.OAUTH_REGISTRATIONS_PER_HOUR,
    metadataFetchesPerMinute: config.OAUTH_CLIENT_METADATA_FETCHES_PER_MINUTE,
  });
  const provider = await createAuthorizationServer({
    db: pool,
    issuer: config.CONSOLE_PUBLIC_URL,
    resource,
    accessTokenTtlSeconds: config.OAUTH_ACCESS_TOKEN_TTL_SECONDS,
    refreshTokenTtlSeconds: config.OAUTH_REFRESH_TOKEN_TTL_SECONDS,
    logger: logger.child({ component: 'oauth' }),
    limits: oauthLimits,
    clientMetadata: {
      allowCidrs: config.OAUTH_CLIENT_METADATA_ALLOW_CIDRS,
      timeoutMs: config.OAUTH_CLIENT_METADATA_TIMEOUT_MS,
      ...(options.outboundExtraCa ? { extraCa: options.outboundExtraCa } : {}),
    },
  });
  const requestLog = new RequestLogWriter(config.DATABASE_URL, logger.child({ component: 'request-log' }));
  const app = await buildConsoleApp({
    logger,
    db: pool,
    sessions: new ConsoleSessions({ db: pool, authenticator, limits }),
    limits,
    clientSubject: (request) => failedAuthSubject(request.ip, config.FAILED_AUTH_IPV6_PREFIX),
    trustProxy: config.TRUST_PROXY,
    catalog: admission.catalog,
    storage: admission.deps.storage,
    temporal: admission.temporal,
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
    admission: admission.deps,
    oauth: { provider, resource, issuer: config.CONSOLE_PUBLIC_URL },
  });
  return {
    app,
    pool,
    async close() {
      await app.close();
      // Listeners and timers before the pool: a reload still querying an ending pool fails, and says so.
      await listener.close();
      await admission.close();
      await requestLog.close();
      await limits.close();
      await pool.end();
    },
  };
}

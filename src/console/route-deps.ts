import type { Client } from '@temporalio/client';
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { CommonQueryMethods } from 'slonik';
import type { FastifyRequest } from 'fastify';
import type { AuthLimits } from '../auth/rate-limit.js';
import type { RequestLogWriter } from '../db/request-log-writer.js';
import type { AdmissionDeps } from '../generations/admission/admit-generation.js';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import type { Storage } from '../storage/storage.js';
import type { ConsoleSessions } from './sessions.js';
import type { UploadLimits } from './uploads.js';
import type Provider from 'oidc-provider';

/** What the console's pages read and act through: the API's own repositories, catalog, storage and admission path. */
export interface ConsoleRouteDeps {
  db: CommonQueryMethods;
  sessions: ConsoleSessions;
  catalog: CatalogCache;
  storage: Storage;
  /** For the progress query of a generation's workflow. */
  temporal: Client;
  /** Admission as the API has it (admitGeneration, quoteGeneration), wired alike by wireAdmission. */
  admission: AdmissionDeps;
  /** The API's request log: the playground's generations are requests made with the session's key. */
  requestLog: RequestLogWriter;
  cookie: CookieSerializeOptions;
  /** The API's per-key and failed-authentication limits: a playground POST is counted as an API call. */
  limits: AuthLimits;
  /**
   * Whom the failed-authentication limit counts for a request: its client address as TRUST_PROXY
   * resolves it, an IPv6 client by its network (FAILED_AUTH_IPV6_PREFIX), exactly as the API counts.
   */
  clientSubject: (request: FastifyRequest) => string;
  /** What one playground form may carry: the API's body limit and data-URI image size. */
  uploadLimits: UploadLimits;
  /** The authorization server for chat apps (OAuth for the MCP endpoint), and the resource it serves. */
  oauth?: OAuthConsoleDeps;
}

export interface OAuthConsoleDeps {
  provider: Provider;
  /** The console's public URL, the issuer. */
  issuer: string;
  /** The MCP URL: what an approved app may call. */
  resource: string;
}

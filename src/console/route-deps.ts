import type { Client } from '@temporalio/client';
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { CommonQueryMethods } from 'slonik';
import type { RequestLogWriter } from '../api/request-log-writer.js';
import type { StartGenerationDeps } from '../api/start-generation.js';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import type { Storage } from '../storage/storage.js';
import type { ConsoleSessions } from './sessions.js';
/** What the console's pages read and act through: the API's own repositories, catalog, storage and admission path. */
export interface ConsoleRouteDeps {
  db: CommonQueryMethods;
  sessions: ConsoleSessions;
  catalog: CatalogCache;
  storage: Storage;
  /** For the progress query of a generation's workflow. */
  temporal: Client;
  /** The API's admission path (startGeneration), configured as the API's. */
  admission: StartGenerationDeps;
  /** The API's request log: the playground's generations are requests made with the session's key. */
  requestLog: RequestLogWriter;
  cookie: CookieSerializeOptions;
  /** Seconds until a down provider is probed again (the API's ProviderAvailability); null while it takes requests. */
  providerDownFor: (provider: string) => number | null;
}

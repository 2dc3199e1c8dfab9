import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, inject } from 'vitest';
import { createConsoleService, type ConsoleService } from '../../src/console/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/process/logger.js';
import { createPaidAccount, type TestAccount } from './api.js';
import { signInOverHttp } from './console-http.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { decideConsent, registeredAppAuthorization, tokenRequest } from './oauth.js';
import { createTestCertificates } from './test-certificates.js';

/** The MCP URL the console issues tokens for in these files (no API runs: tokens are read from the store). */
export const resource = 'http://127.0.0.1:8080/v1/mcp';
/** Where the test apps are sent back to (a loopback redirect: nothing listens, nothing is followed). */
export const redirectUri = 'http://127.0.0.1:7/callback';

/** What a served Client ID Metadata Document answers. */
export interface ServedDocument {
  status?: number;
  headers?: Record<string, string>;
  body: unknown;
}

export interface OAuthConsole {
  db: TestDatabase;
  /** A paid account, signed in as `cookie`. */
  account: TestAccount;
  consoleUrl: string;
  cookie: string;
  /** Client ID Metadata Documents, served over HTTPS on loopback (`documentOrigin`): path → answer. */
  documents: Map<string, ServedDocument>;
  /** The paths the document server was asked for, in order. */
  documentRequests: string[];
  documentOrigin: string;
  /** The grant records of a client. */
  grantsOf(clientId: string): Promise<readonly { grant_id: string; revoked_at: string | null }[]>;
  /** An app registered and approved: its client id, the code it got back and its PKCE verifier. */
  approvedCode(name: string): Promise<{ clientId: string; verifier: string; code: string }>;
  /** The app's code exchanged at the token endpoint; the raw answer. */
  redeem(app: { clientId: string; verifier: string }, code: string): Promise<Response>;
}

const grantRow = z.object({ grant_id: z.string(), revoked_at: z.string().nullable() });

/**
 * The console alone (its authorization server) on a fresh database, spoken to over plain HTTP as a
 * hostile or careless client would: no API, no worker. Clients are told apart by X-Forwarded-For
 * (TRUST_PROXY=1); metadata documents may be on 127.0.0.1; `env` adds or changes settings. Call
 * inside describe(); the fields are set by the time the tests run.
 */
export function useOAuthConsole(env: Record<string, string> = {}): OAuthConsole {
  const harness = {
    documents: new Map<string, ServedDocument>(),
    documentRequests: [] as string[],
  } as OAuthConsole;
  let storageDir = '';
  let consoleService: ConsoleService | undefined;
  let documentServer: https.Server | undefined;
  beforeAll(async () => {
    storageDir = await mkdtemp(join(tmpdir(), 'oauth-console-'));
    harness.db = await createTestDatabase();
    harness.account = await createPaidAccount(harness.db.pool);
    const certificates = await createTestCertificates('localhost');
    documentServer = https.createServer(
      { cert: certificates.server.cert, key: certificates.server.key },
      (request, response) => {
        harness.documentRequests.push(request.url!);
        const document = harness.documents.get(request.url!);
        response.writeHead(document?.status ?? (document ? 200 : 404), {
          'content-type': 'application/json',
          ...document?.headers,
        });
        response.end(JSON.stringify(document?.body ?? {}));
      },
    );
    await new Promise<void>((done) => documentServer!.listen(0, '127.0.0.1', done));
    harness.documentOrigin = `https://localhost:${(documentServer.address() as AddressInfo).port}`;
    const port = await freePort();
    harness.consoleUrl = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      DATABASE_URL: harness.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: 'oauth-console-unused',
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9/results',
      API_PUBLIC_URL: 'http://127.0.0.1:8080/v1',
      CONSOLE_PORT: String(port),
      TRUST_PROXY: '1',
      OAUTH_CLIENT_METADATA_ALLOW_CIDRS: '127.0.0.1',
      ...env,
    });
    consoleService = await createConsoleService(config, createLogger('console-test', 'silent'), {
      outboundExtraCa: [certificates.ca.cert],
    });
    await consoleService.app.listen({ host: '127.0.0.1', port });
    harness.cookie = (await signInOverHttp(harness.consoleUrl, harness.account.key)).cookie;
  });
  afterAll(async () => {
    await consoleService?.close();
    documentServer?.close();
    await harness.db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });
  harness.grantsOf = (clientId) =>
    harness.db.pool.any(sql.type(grantRow)`
      SELECT grant_id, revoked_at FROM oauth_grants WHERE client_id = ${clientId} ORDER BY created_at`);
  harness.approvedCode = async (name) => {
    const app = await registeredAppAuthorization(harness.consoleUrl, resource, { name, redirectUri });
    const { back } = await decideConsent(harness.consoleUrl, harness.cookie, app.authorizationUrl);
    return { ...app, code: back.searchParams.get('code')! };
  };
  harness.redeem = (app, code) =>
    tokenRequest(harness.consoleUrl, {
      grant_type: 'authorization_code',
      client_id: app.clientId,
      code,
      code_verifier: app.verifier,
      redirect_uri: redirectUri,
      resource,
    });
  return harness;
}

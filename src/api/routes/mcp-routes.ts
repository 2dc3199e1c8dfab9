import type { Principal } from '../../auth/authenticator.js';
import { apiKeySchema, toApiKey } from '../key-schemas.js';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BaseLogger } from 'pino';
import type { Registry } from 'prom-client';
import type { CommonQueryMethods } from 'slonik';
import { getBalance, type CreditBalance } from '../../db/credits-repository.js';
import { MCP_SCOPE } from '../../auth/oauth-resource.js';
import { InsufficientScopeError } from '../../auth/oauth-tokens.js';
import { ApiError } from '../../vocabulary/errors.js';
import type { AdmissionDeps } from '../../generations/admission/admit-generation.js';
import type { InvalidatedCache } from '../../caches/invalidated-cache.js';
import { toJsonSchema } from '../../validation/json-schema.js';
import type { McpDeps } from '../../mcp/mcp-deps.js';
import { buildMcpServer } from '../../mcp/mcp-server.js';
import { previewConcurrency, Previews } from '../../mcp/previews.js';
import { principalOf } from '../auth-plugin.js';
import { readOwnGeneration, type GenerationCache } from '../cached-generation.js';
import type { GenerationWaiters } from '../generation-waiters.js';
import { toGeneration } from '../generation-view.js';
import { creditBalanceSchema, generationListSchema, generationSchema, quoteSchema } from '../schemas.js';

export interface McpRouteDeps {
  mcp: McpDeps;
  /** The API's public URL (`…/v1`): the MCP endpoint is `{publicUrl}/mcp`. */
  publicUrl: string;
  /** Origins besides the API's own and loopback whose browsers may call (MCP_ALLOWED_ORIGINS). */
  allowedOrigins: readonly string[];
}

/**
 * POST /v1/mcp: the Model Context Protocol over Streamable HTTP, stateless. Each request gets a
 * fresh MCP server and transport (no session state), so any API process answers any request; what
 * lasts (generations, which are the tasks) is in PostgreSQL. An initialize is answered with an
 * Mcp-Session-Id that names no state (clients send it back; nothing checks it). The request is an
 * API request like any other: the API key authenticates it and its budget counts it once (a tool call
 * counts as the API call it makes), the body limit, the request log and the metrics apply. So one
 * request carries one message: a JSON-RPC batch (an array) is refused with -32600, whatever the
 * protocol version. GET and DELETE are 405 with Allow: POST (the app's unknown-method answer): a
 * stateless server has no stream to open and no session to end. A browser Origin other than the
 * API's own, loopback or one configured is refused (DNS rebinding).
 */
export function mcpRoutes(app: FastifyInstance, deps: McpRouteDeps): void {
  const endpoint = new URL(`${deps.publicUrl}/mcp`);
  // RFC 9728's path form: the metadata of the resource `{origin}/v1/mcp`.
  const resourceMetadata = `${endpoint.origin}/.well-known/oauth-protected-resource${endpoint.pathname}`;
  const allowed = new Set([new URL(deps.publicUrl).origin.toLowerCase(), ...deps.allowedOrigins]);
  const challenge = (error: string | null) =>
    `Bearer ${error ? `error="${error}", ` : ''}scope="${MCP_SCOPE}", resource_metadata="${resourceMetadata}"`;

  void app.register((scope, _options, done) => {
    // An account the paid-purchase rule (or disabled access) refuses still gets the protocol: its
    // key is recognised, and each tool call answers the 403 in words. Every other error is the app's.
    const appErrors = scope.errorHandler;
    scope.setErrorHandler((error, request, reply) => {
      // An access token without the `mcp` scope: the MCP authorization spec's 403 (RFC 6750 §3.1).
      if (error instanceof InsufficientScopeError) {
        request.errorCode = 'insufficient_scope';
        return reply
          .code(403)
          .header('www-authenticate', challenge('insufficient_scope'))
          .type('application/json')
          .send({ jsonrpc: '2.0', error: { code: -32000, message: error.message }, id: null });
      }
      const key = request.recognisedKey;
      if (
        error instanceof ApiError &&
        error.status === 403 &&
        key &&
        request.method === 'POST' &&
        (request.headers.origin === undefined || originAllowed(request.headers.origin, allowed))
      ) {
        request.errorCode = error.code;
        // Refused before its body was read: read here, within the app's body limit.
        return readBody(request, scope.initialConfig.bodyLimit ?? 1024 * 1024).then(
          (body) => answer(deps.mcp, request, reply, { ...key, refusal: error }, body),
          () => appErrors.call(scope, error, request, reply),
        );
      }
      return appErrors.call(scope, error, request, reply);
    });
    // The JSON-RPC body is handed to the MCP transport as text: a body that is not JSON is the
    // protocol's parse error (-32700), not the REST API's envelope.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, parsed) =>
      parsed(null, body),
    );
    scope.post(
      '/v1/mcp',
      {
        config: { checksOwnBody: true },
        // A 401 names where to learn how to get a token and the scope to ask for (the MCP
        // authorization spec, RFC 9728), and whether what was sent was refused (RFC 6750 §3.1).
        onSend: (request, reply, payload, next) => {
          if (reply.statusCode === 401) reply.header('www-authenticate', challenge(refusedAs(request)));
          next(null, payload);
        },
        preHandler: (request, reply, next) => {
          const origin = request.headers.origin;
          if (origin === undefined || originAllowed(origin, allowed)) return next();
          request.errorCode = 'forbidden_origin';
          void reply
            .code(403)
            .type('application/json')
            .send({
              jsonrpc: '2.0',
              error: { code: -32000, message: `Forbidden: requests from origin ${origin} are not accepted.` },
              id: null,
            });
        },
      },
      (request, reply) => answer(deps.mcp, request, reply, principalOf(request)),
    );
    done();
  });
}

/** The MCP server's view of the API: its admission, cached reads, waiters and response shapes. */
export function mcpDepsOf(deps: {
  db: CommonQueryMethods;
  admission: AdmissionDeps;
  cache: GenerationCache;
  balances: InvalidatedCache<string, CreditBalance>;
  waiting?: { waiters: GenerationWaiters; maxSeconds: number };
  /** MCP_WAIT_SECONDS. */
  waitSeconds: number;
  /** MCP_PREVIEW_CONCURRENCY, and where the decodes are counted. */
  previews: { concurrency?: number; registry?: Registry; log: Pick<BaseLogger, 'warn'> };
}): McpDeps {
  const { db, balances, waiting } = deps;
  return {
    db,
    admission: deps.admission,
    readGeneration: (accountId, id) => readOwnGeneration({ db, cache: deps.cache }, accountId, id),
    forget: (id) => deps.cache.invalidate(id),
    balance: async (accountId) =>
      balances.peek(accountId) ?? balances.get(accountId, (id) => getBalance(db, id)),
    waitFor: (...args) => waiting?.waiters.wait(...args) ?? null,
    // Within the longest wait the API allows (the request timeout's, at most 60 s).
    waitSeconds: Math.min(deps.waitSeconds, waiting?.maxSeconds ?? 0),
    outputSchemas: {
      generation: toJsonSchema(generationSchema),
      generationList: toJsonSchema(generationListSchema),
      quote: toJsonSchema(quoteSchema),
      credits: toJsonSchema(creditBalanceSchema),
      key: toJsonSchema(apiKeySchema),
    },
    toGeneration,
    toApiKey,
    previews: new Previews(deps.admission.storage, {
      ...deps.previews,
      concurrency: deps.previews.concurrency ?? previewConcurrency,
    }),
  };
}

/** A request's body as text, read from the socket (at most `limit` bytes, else it rejects). */
function readBody(request: FastifyRequest, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.raw.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return request.raw.destroy(new Error('body too large'));
      chunks.push(chunk);
    });
    request.raw.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.raw.once('error', reject);
  });
}

/**
 * The RFC 6750 error of a 401: none when no credential was sent (the client learns it needs one),
 * `invalid_request` for an Authorization header that is not `Bearer <token>`, else `invalid_token`
 * (unknown, expired, revoked or malformed).
 */
function refusedAs(request: FastifyRequest): string | null {
  const authorization = request.headers.authorization;
  if (authorization !== undefined)
    return /^Bearer\s+\S+\s*$/i.test(authorization) ? 'invalid_token' : 'invalid_request';
  return request.headers['x-api-key'] === undefined ? null : 'invalid_token';
}

/** Whether a body is a JSON-RPC batch (a JSON array); a body that is not JSON is the transport's -32700. */
function isBatch(body: unknown): boolean {
  if (typeof body !== 'string' || !/^\s*\[/.test(body)) return false;
  try {
    return Array.isArray(JSON.parse(body));
  } catch {
    return false;
  }
}

function isInitialize(body: unknown): boolean {
  if (typeof body !== 'string' || !body.includes('initialize')) return false;
  try {
    return (JSON.parse(body) as { method?: unknown }).method === 'initialize';
  } catch {
    return false;
  }
}

/** Whether a browser at `origin` may call: the API's own origin, loopback, or one configured. */
function originAllowed(origin: string, allowed: Set<string>): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  if (['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)) return true;
  return allowed.has(url.origin.toLowerCase());
}

async function answer(
  mcp: McpDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  caller: Pick<Principal, 'accountId' | 'keyId'> & Partial<Principal> & { refusal?: ApiError },
  body: unknown = request.body,
): Promise<FastifyReply> {
  if (isBatch(body)) {
    // One HTTP request is one call's worth of limits and one row of the request log: a batch of
    // calls would have them all ride on one. Refused for every protocol version (those from
    // 2025-06-18 have no batching; nothing needs it before), before any message runs.
    request.errorCode = 'batch_not_supported';
    request.log.info('MCP batch refused');
    return reply
      .code(400)
      .type('application/json')
      .send({
        jsonrpc: '2.0',
        error: {
          code: -32600,
          message: 'Invalid Request: JSON-RPC batches are not supported; send one message per HTTP request.',
        },
        id: null,
      });
  }
  const gone = new AbortController();
  const server = buildMcpServer(
    mcp,
    {
      accountId: caller.accountId,
      keyId: caller.keyId,
      access: caller.access ?? 'full',
      models: caller.models ?? null,
      signal: gone.signal,
      // The request log's error code: the last tool error of the request (the answer is a 200).
      noteError: (code) => (request.errorCode = code),
    },
    request.log,
    caller.refusal,
  );
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  reply.raw.once('close', () => {
    gone.abort();
    void server.close().catch(() => undefined);
  });
  await server.connect(transport);
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers))
    for (const one of [value ?? []].flat()) headers.append(name, one);
  const response = await transport.handleRequest(
    new Request(`http://localhost${request.url}`, {
      method: 'POST',
      headers,
      body: typeof body === 'string' ? body : '',
    }),
  );
  reply.code(response.status);
  response.headers.forEach((value, name) => void reply.header(name, value));
  // A session id that names no state: it lets clients that keep one (and their logs) tell their
  // connection's requests apart, and any process accepts any id, because there is nothing to find.
  if (response.status === 200 && isInitialize(body)) reply.header('mcp-session-id', `mcp-${randomUUID()}`);
  if (response.headers.get('content-type')?.startsWith('text/event-stream'))
    reply.header('cache-control', 'no-store').header('x-accel-buffering', 'no');
  if (!response.body) return reply.send();
  return reply.send(Readable.fromWeb(response.body as WebReadableStream<Uint8Array>));
}

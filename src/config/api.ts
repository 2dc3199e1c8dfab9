import { z } from 'zod';
import { isValidRange } from '../net/address-policy.js';
import { int, settingGroup } from './setting.js';

/**
 * Who may tell us the client's address in X-Forwarded-For: nobody (`false`), the
 * nearest N hops (the proxies in front, when nothing else can reach the API), or
 * peers at these addresses/CIDRs. The client's address is then the nearest one
 * not trusted; entries further out are the client's own writing.
 */
export type TrustProxy = false | number | readonly string[];

const trustProxy = z
  .string()
  .default('false')
  .transform((raw, ctx): TrustProxy => {
    const value = raw.trim();
    if (value === '' || value === 'false') return false;
    if (/^\d+$/.test(value)) return Number(value) === 0 ? false : Number(value);
    const alternatives =
      'use false (clients connect directly), the number of proxies in front (e.g. 1), or their addresses/CIDRs (e.g. 10.0.0.0/8)';
    if (value === 'true') {
      ctx.addIssue({
        code: 'custom',
        message: `true would believe any client's X-Forwarded-For; ${alternatives}`,
      });
      return z.NEVER;
    }
    const entries = value.split(',').map((entry) => entry.trim());
    const bad = entries.filter((entry) => !isValidRange(entry));
    if (bad.length > 0) {
      ctx.addIssue({
        code: 'custom',
        message: `${bad.map((entry) => JSON.stringify(entry)).join(', ')} ${bad.length === 1 ? 'is not an IP address or CIDR' : 'are not IP addresses or CIDRs'}; ${alternatives}`,
      });
      return z.NEVER;
    }
    return entries;
  });

/** The HTTP API: where it listens, what it accepts, its limits and caches. */
export const apiSettings = settingGroup({
  title: 'API',
  shape: {
    API_HOST: z.string().default('127.0.0.1'),
    API_PORT: int(8080),
    API_PUBLIC_URL: z.string().url().optional(),
    TRUST_PROXY: trustProxy,
    BODY_LIMIT_BYTES: int(32 * 1024 * 1024, 1024),
    RATE_LIMIT_PER_MINUTE: int(600, 1),
    FAILED_AUTH_IPV6_PREFIX: z.coerce.number().int().min(32).max(128).default(64),
    FAILED_AUTH_PROCESS_PER_MINUTE: int(600, 1),
    UNKNOWN_KEY_CACHE_MS: int(30_000),
    // Node's requestTimeout and headersTimeout: a slow client cannot hold a socket or a buffer for long.
    API_REQUEST_TIMEOUT_MS: int(60_000, 100),
    API_HEADERS_TIMEOUT_MS: int(10_000, 100),
    CACHE_TTL_MS: int(60_000),
    CATALOG_REFRESH_MS: int(30_000, 100),
    REDIS_URL: z
      .string()
      .optional()
      .transform((value) => (value?.trim() ? value.trim() : undefined))
      .refine((value) => value === undefined || /^rediss?:\/\//.test(value), {
        message: 'must be a redis:// or rediss:// URL (redis://host:6379/0)',
      }),
    REDIS_TIMEOUT_MS: int(250, 10),
    EVENT_STREAMS_PER_KEY: int(1_000, 1),
    EVENT_STREAMS_PER_ACCOUNT: int(1_000, 1),
    EVENT_STREAMS_PER_PROCESS: int(10_000, 1),
    EVENT_STREAM_KEEPALIVE_MS: int(15_000, 100),
    MCP_WAIT_SECONDS: int(50, 0),
    MCP_PREVIEW_CONCURRENCY: int(2, 1),
    MCP_ALLOWED_ORIGINS: z
      .string()
      .default('')
      .transform((raw) =>
        raw
          .split(',')
          .map((origin) => origin.trim().toLowerCase().replace(/\/$/, ''))
          .filter((origin) => origin !== ''),
      ),
  },
  docs: {
    API_HOST: { readBy: ['api'], text: 'The address the API listens on.' },
    API_PORT: { readBy: ['api'], text: 'The port the API listens on.' },
    API_PUBLIC_URL: {
      readBy: ['api', 'console'],
      text: 'The spec’s `{base_url}`: what clients are told to call, ending in `/v1`. `{base_url}/mcp` is the MCP endpoint, the one resource the console issues OAuth tokens for.',
      default: '`http://API_HOST:API_PORT/v1`',
    },
    TRUST_PROXY: {
      readBy: ['api', 'console'],
      text: 'Whose `X-Forwarded-For` to believe: `false`, the number of proxies in front, or their addresses/CIDRs, comma-separated. `true` is refused. See [Behind a load balancer](operating.md#behind-a-load-balancer-or-cdn-trust_proxy).',
    },
    BODY_LIMIT_BYTES: {
      readBy: ['api', 'console'],
      text: 'Larger bodies get `413 payload_too_large`; the console holds a playground form (its uploads included) to it too.',
    },
    RATE_LIMIT_PER_MINUTE: {
      readBy: ['api', 'console'],
      text: 'Requests per minute per API key, replays included (`429 rate_limited` beyond it).',
    },
    FAILED_AUTH_IPV6_PREFIX: {
      readBy: ['api', 'console'],
      text: 'The failed-authentication limit counts an IPv6 client by its network of this many bits (32 to 128), so rotating through one’s own /64 is one client. IPv4 clients are counted by address.',
    },
    FAILED_AUTH_PROCESS_PER_MINUTE: {
      readBy: ['api'],
      text: 'Failed key lookups (unknown or revoked keys, and unknown OAuth access tokens at `/v1/mcp`) one API process allows per minute, all clients together. Beyond it, a key or token that would need a query and has not worked on this process in the last day gets `429 rate_limited` without one; those that worked lately are still looked up.',
    },
    UNKNOWN_KEY_CACHE_MS: {
      readBy: ['api'],
      text: 'How long a key (or an OAuth access token) PostgreSQL does not know is answered `401` from memory (at most 100 000 of each remembered; keys forgotten on any key change); `0`: asked every time.',
    },
    API_REQUEST_TIMEOUT_MS: {
      readBy: ['api'],
      text: 'A client’s whole request, body included, must arrive in this; else 408 and the connection is closed.',
    },
    API_HEADERS_TIMEOUT_MS: {
      readBy: ['api'],
      text: 'The same for its headers alone (at most `API_REQUEST_TIMEOUT_MS`).',
    },
    CACHE_TTL_MS: {
      readBy: ['api'],
      text: 'How long a resolved API key or a balance is trusted without asking PostgreSQL; changes are pushed at once by NOTIFY.',
    },
    CATALOG_REFRESH_MS: {
      readBy: ['api', 'console'],
      text: 'Catalog and provider-state reload safety net; changes are also pushed by NOTIFY.',
    },
    EVENT_STREAMS_PER_KEY: {
      readBy: ['api'],
      text: 'Open event streams (`GET /v1/generations/{id}/events` and `GET /v1/events` together) allowed per API key in one API process; past it, `429 stream_limit_exceeded`.',
    },
    EVENT_STREAMS_PER_ACCOUNT: {
      readBy: ['api'],
      text: 'The same for all the keys of one account together, per API process (an account has at most 5 active keys; a revoked key’s streams end within a second), so that one account cannot take the whole process’s share.',
    },
    EVENT_STREAMS_PER_PROCESS: {
      readBy: ['api'],
      text: 'The same for all accounts together, per API process.',
    },
    EVENT_STREAM_KEEPALIVE_MS: {
      readBy: ['api'],
      text: 'How often an open event stream gets a keep-alive comment, so that proxies do not close it as idle.',
    },
    MCP_WAIT_SECONDS: {
      readBy: ['api'],
      text: 'How long an MCP `create_generation` or `get_generation` call without a task waits for the generation to finish (sending progress notifications) before it answers with the generation as it stands; 0 answers at once. At most 60 s and within `API_REQUEST_TIMEOUT_MS`. See [MCP](mcp.md).',
    },
    MCP_PREVIEW_CONCURRENCY: {
      readBy: ['api'],
      text: 'Previews (an image’s, a video’s poster frame) one API process makes at once for MCP tool results; more wait their turn. Each is made once, on its first ask, and kept beside its file (`…-preview.webp`): later calls read it. See [MCP](mcp.md#results).',
    },
    MCP_ALLOWED_ORIGINS: {
      readBy: ['api'],
      text: 'Comma-separated origins (`https://app.example.com`) whose browsers may call `/v1/mcp`, besides the API’s own origin and loopback; a request with any other `Origin` header is refused with 403 (DNS-rebinding protection). Requests without `Origin` (every non-browser client) are not affected.',
    },
    REDIS_URL: {
      readBy: ['api', 'worker', 'console'],
      text: 'Redis or Valkey (`redis://`, `rediss://`) where every API process counts the per-key and failed-authentication limits, and every worker the providers’ request budgets. Unset: each API process counts in memory, and workers share the budgets through PostgreSQL. See [Limits shared by every API replica](operating.md#limits-shared-by-every-api-replica-redis_url).',
    },
    REDIS_TIMEOUT_MS: {
      readBy: ['api', 'worker', 'console'],
      text: 'A limit or budget check waits this long for Redis, then counts in the process’s memory.',
    },
  },
});

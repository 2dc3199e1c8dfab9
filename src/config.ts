import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { ProviderName } from './catalog/provider-mapping.js';
import { isValidRange } from './net/address-policy.js';
import { projectRoot } from './project-root.js';
import { joinValues, parseOptions } from './zod-messages.js';
import type { StorageLocation } from './storage/open-storage.js';
import type { StepHorizons } from './workflows/generation-types.js';

/**
 * The whole service is configured by environment variables, parsed here once.
 * Production entry points (`npm run api|worker|migrate`) read only these; the
 * development launcher (`npm start`) fills in DATABASE_URL and TEMPORAL_ADDRESS
 * for the embedded servers it starts.
 */
/** A variable's message when it is unset; any other problem keeps zod's message. */
const requiredError = (message: string) => (issue: { input: unknown }) =>
  issue.input === undefined ? message : undefined;

/**
 * An enum whose refusal lists its values in the order written: zod 4 keeps an enum's values as an
 * object's keys, which puts integer-like ones ('1', '0') first.
 */
const inOrder = <T extends string>(values: readonly [T, ...T[]]) =>
  z.enum(values, {
    error: (issue) =>
      // Environment variables are text; anything else keeps zod's own message.
      typeof issue.input === 'string'
        ? `Invalid enum value. Expected ${joinValues(values)}, received '${issue.input}'`
        : undefined,
  });

const int = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);
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

/** A credential: absent when unset or blank. */
const secret = z
  .string()
  .optional()
  .transform((value) => (value?.trim() ? value.trim() : undefined));
/** An optional variable for which blank means unset (docker-compose passes `${VAR:-}` through as ''). */
const blankIsUnset = <T extends z.ZodType>(schema: T) =>
  z.preprocess(
    (value) => (typeof value === 'string' && value.trim() === '' ? undefined : value),
    schema.optional(),
  );
/** A provider's base URL, without a trailing slash. */
const baseUrl = (fallback: string) =>
  z
    .string()
    .url()
    .default(fallback)
    .transform((url) => url.replace(/\/+$/, ''));

/** A PEM certificate or key: the PEM text itself, or the path of a file holding it (read once, at start). */
const pem = z
  .string()
  .optional()
  .transform((value, ctx): Buffer | undefined => {
    const text = value?.trim();
    if (!text) return undefined;
    // PEM text; from an .env file its line breaks may arrive as the two characters \n.
    if (text.startsWith('-----BEGIN'))
      return Buffer.from(`${text.includes('\n') ? text : text.replaceAll('\\n', '\n')}\n`);
    try {
      return readFileSync(text);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      // The value is not echoed: it may be a key in a form we do not read (base64, quoted).
      ctx.addIssue({
        code: 'custom',
        message: `is not PEM text, and no file of that name can be read (${code}); give the PEM text or a PEM file's path`,
      });
      return z.NEVER;
    }
  });

/**
 * How every connection to Temporal (API, worker, admin CLI, launcher) is secured. TLS is on when any
 * of these is set (an API key too: Temporal Cloud takes keys over TLS only), unless TEMPORAL_TLS=false.
 */
const temporalSecurityShape = {
  /** true: TLS with the system's CAs and nothing else set; false: plaintext even with an API key (a local proxy). */
  TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
  /** mTLS: this process's client certificate and its key (PEM, or a file path), both or neither. */
  TEMPORAL_TLS_CERT: pem,
  TEMPORAL_TLS_KEY: pem,
  /** The CA that signed the server's certificate, when the system does not trust it. */
  TEMPORAL_TLS_CA: pem,
  /** The name the server's certificate must carry, when it differs from TEMPORAL_ADDRESS's host. */
  TEMPORAL_TLS_SERVER_NAME: z.string().trim().min(1).optional(),
  /** Sent as `Authorization: Bearer …` on every call (Temporal Cloud API keys). */
  TEMPORAL_API_KEY: secret,
};
type TemporalSecurity = z.output<z.ZodObject<typeof temporalSecurityShape>>;

const configSchema = z.object({
  DATABASE_URL: z
    .string({ error: requiredError('is required (postgres://user:password@host:port/database)') })
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
  DATABASE_POOL_SIZE: int(10, 1),

  TEMPORAL_ADDRESS: z
    .string({ error: requiredError('is required (host:port of the Temporal frontend)') })
    .min(1),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('generations'),
  ...temporalSecurityShape,

  API_HOST: z.string().default('127.0.0.1'),
  API_PORT: int(8080),
  /** The {base_url} of the spec: what clients are told to call, ending in /v1. */
  API_PUBLIC_URL: z.string().url().optional(),
  /** Which proxies' X-Forwarded-For to believe: false, a hop count, or addresses/CIDRs (see TrustProxy). */
  TRUST_PROXY: trustProxy,
  BODY_LIMIT_BYTES: int(32 * 1024 * 1024, 1024),
  /** Requests per minute per API key, replays included (429 rate_limited beyond it). */
  RATE_LIMIT_PER_MINUTE: int(600, 1),
  /**
   * How long a client may take to send a whole request, body included, and its headers alone
   * (Node's requestTimeout and headersTimeout): a slow client cannot hold a socket or a buffer for
   * long. Past either the connection is answered 408 and closed. Answering takes as long as it
   * takes (admission has its own ADMISSION_TIMEOUT_MS).
   */
  API_REQUEST_TIMEOUT_MS: int(60_000, 100),
  API_HEADERS_TIMEOUT_MS: int(10_000, 100),
  /** How long a resolved API key or a balance is trusted without asking PostgreSQL; changes are pushed at once by NOTIFY. */
  CACHE_TTL_MS: int(60_000),
  CATALOG_REFRESH_MS: int(30_000, 100),

  /** Generations in progress (queued) per account; more are rejected with 429 concurrency_limit_exceeded. */
  CONCURRENT_GENERATIONS_PER_ACCOUNT: int(10, 1),
  /** How long POST waits for admission and handover before answering 503 (retry with the same key). */
  ADMISSION_TIMEOUT_MS: int(10_000, 100),
  /**
   * Each of the two submission attempts made while POST waits; a provider slower than that gets
   * the job in the background and the 202 shows it queued. Keep 2 × this under ADMISSION_TIMEOUT_MS.
   */
  PROVIDER_SUBMIT_TIMEOUT_MS: int(3_000, 10),
  /**
   * Step horizons: how long each step of a generation is retried before the workflow gives up on
   * it (see StepHorizons). Admission's must leave the handover room within ADMISSION_TIMEOUT_MS.
   */
  ADMISSION_HORIZON_MS: int(4_000, 100),
  SUBMIT_HORIZON_MS: int(3_600_000, 1_000),
  PROVIDER_WAIT_HORIZON_MS: int(6 * 3_600_000, 1_000),
  PERSIST_HORIZON_MS: int(6 * 3_600_000, 1_000),
  BOOKKEEPING_HORIZON_MS: int(24 * 3_600_000, 1_000),
  /** How often the reconciliation schedule looks for generations whose workflow is gone. */
  RECONCILE_INTERVAL_MS: int(5 * 60_000, 1_000),
  /** A queued generation untouched this long, with no running workflow of its own, is finished by reconciliation. */
  RECONCILE_GRACE_MS: int(15 * 60_000, 0),
  /** How often the worker asks the provider about a running job. */
  PROVIDER_POLL_INTERVAL_MS: int(2_000, 10),
  /** Results are kept this long after storage (the spec: 30 days). */
  RESULT_RETENTION_MS: int(30 * 24 * 3600 * 1000, 1),
  /** An Idempotency-Key is held this long after creation (the spec: at least 180 days). */
  IDEMPOTENCY_RETENTION_MS: int(180 * 24 * 3600 * 1000, 1),
  /**
   * Workflows a worker keeps in memory between their tasks. Generations spend
   * weeks parked on timers; an evicted one is rebuilt from its history when it
   * wakes, so a small cache keeps a worker's memory flat however many are parked.
   */
  WORKER_MAX_CACHED_WORKFLOWS: int(100, 2),
  /** Short activities a worker runs at once (submit, persist, refund, expire). */
  WORKER_MAX_CONCURRENT_ACTIVITIES: int(100, 1),
  /** Provider waits a worker runs at once, on their own task queue: each is an idle poll loop. */
  WORKER_MAX_PROVIDER_WAITS: int(1000, 1),
  /** The simulated provider's time to produce a result. */
  SIM_PROVIDER_DELAY_MS: int(3_000),
  /**
   * Address ranges (CIDRs or single addresses, comma-separated) that fetches of URLs given to us
   * may reach although they are not public: an internal image mirror, say. Empty by default:
   * only public addresses. Cloud metadata endpoints stay refused whatever this says.
   */
  OUTBOUND_ALLOW_CIDRS: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(/[\s,]+/)
        .map((range) => range.trim())
        .filter(Boolean),
    )
    .refine((ranges) => ranges.every(isValidRange), {
      message: 'must be comma-separated CIDRs or addresses, such as 10.20.0.0/16,fd12::/64',
    }),

  /**
   * Real providers. A provider without its key is not offered: its catalog models are left out of
   * GET /v1/models and refused as unknown at POST. The URLs may point anywhere speaking the same
   * protocol (a proxy, a regional endpoint, a test server). Keys never reach a log line.
   */
  FAL_KEY: secret,
  FAL_QUEUE_URL: baseUrl('https://queue.fal.run'),
  REPLICATE_API_TOKEN: secret,
  REPLICATE_API_URL: baseUrl('https://api.replicate.com/v1'),
  OPENAI_API_KEY: secret,
  OPENAI_BASE_URL: baseUrl('https://api.openai.com/v1'),
  /**
   * Jobs each provider account may have in flight at once; more wait in our queue (status queued)
   * instead of collecting 429s. 0: no cap (the simulated provider's default).
   */
  FAL_MAX_IN_FLIGHT: int(10),
  REPLICATE_MAX_IN_FLIGHT: int(20),
  OPENAI_MAX_IN_FLIGHT: int(5),
  SIM_PROVIDER_MAX_IN_FLIGHT: int(0),
  /** Failures in a row (unreachable, 5xx, lost answers; never 429s) that take a provider down. */
  PROVIDER_DOWN_AFTER_FAILURES: int(5, 1),
  /** While a provider is down: how often it is probed, and the Retry-After its refused POSTs get. */
  PROVIDER_PROBE_INTERVAL_MS: int(30_000, 100),

  /** The worker's health port (GET /healthz, /readyz); unset: none (several workers may share a host). */
  WORKER_HEALTH_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  WORKER_HEALTH_HOST: z.string().default('127.0.0.1'),
  /** How long the worker, at start, waits for PostgreSQL and Temporal (and the API for PostgreSQL) before exiting. */
  DEPENDENCY_WAIT_TIMEOUT_MS: int(5 * 60_000, 0),
  /** On SIGTERM the worker stops polling; activities in flight get this long to finish before they are cancelled. */
  WORKER_SHUTDOWN_GRACE_MS: int(30_000, 0),

  // ── capacity and pruning (issue 13) ──
  /**
   * How often the pruning schedule deletes what would grow without end (0: no schedule, nothing is
   * pruned): key records past their horizon, and the request log, rejected generations and the
   * simulated provider's jobs past their retention. One run does bounded work: each table is
   * pruned in statements of PRUNE_BATCH_SIZE rows, at most PRUNE_MAX_BATCHES of them.
   */
  PRUNE_INTERVAL_MS: int(3_600_000, 0),
  PRUNE_BATCH_SIZE: int(5_000, 1),
  PRUNE_MAX_BATCHES: int(20, 1),
  /** The API request log is kept this long (0: forever). */
  REQUEST_LOG_RETENTION_MS: int(90 * 24 * 3600 * 1000, 0),
  /** Rejected generations are kept this long (0: forever), and never less than IDEMPOTENCY_RETENTION_MS (a 402 answers for its key). */
  REJECTED_RETENTION_MS: int(180 * 24 * 3600 * 1000, 0),
  /** The simulated provider's jobs are kept this long after submission (0: forever); longer than every step's horizon. */
  SIM_PROVIDER_JOB_RETENTION_MS: int(7 * 24 * 3600 * 1000, 0),

  // ── Object storage (issue 13) ──
  /**
   * Where results and inline input images are stored: `file:///absolute/folder`, or
   * `s3://bucket/optional/key/prefix` for any S3-compatible store. Unset: the folder STORAGE_DIR.
   * Credentials for a bucket come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
   * AWS_SECRET_ACCESS_KEY, a profile, a role), never from here.
   */
  STORAGE_URL: z
    .string()
    .trim()
    .optional()
    .transform((value) => value || undefined)
    .superRefine((value, ctx) => {
      const problem = value === undefined ? null : storageUrlProblem(value);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  /** A non-AWS store's endpoint (MinIO, Cloudflare R2, GCS interoperability): `https://host[:port]`. */
  S3_ENDPOINT: blankIsUnset(
    z.string().regex(/^https?:\/\/[^/]/, 'must be an http:// or https:// URL, such as http://minio:9000'),
  ),
  /** The bucket's region; unset: the SDK's own (AWS_REGION, the profile). */
  S3_REGION: blankIsUnset(z.string()),
  /** Path-style requests (`endpoint/bucket/key`), which MinIO and most self-hosted stores need. */
  S3_FORCE_PATH_STYLE: inOrder(['true', 'false', '1', '0', ''])
    .default('false')
    .transform((value) => value === 'true' || value === '1'),

  // ── Shared limits (issue 13) ──
  /**
   * Redis or Valkey (`redis://` or `rediss://`) where every API process counts the per-key and
   * failed-authentication limits, so replicas share them. Unset: each process counts in memory.
   */
  REDIS_URL: z
    .string()
    .optional()
    .transform((value) => (value?.trim() ? value.trim() : undefined))
    .refine((value) => value === undefined || /^rediss?:\/\//.test(value), {
      message: 'must be a redis:// or rediss:// URL (redis://host:6379/0)',
    }),
  /** Longest a limit check waits for Redis; past it the request is counted in this process's memory. */
  REDIS_TIMEOUT_MS: int(250, 10),

  // ── Metrics and tracing (issue 13) ──
  /** The API's Prometheus port (GET /metrics); unset: none. A port of its own, out of the request log. */
  METRICS_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** Where every metrics port listens: loopback unless Prometheus scrapes from another host. */
  METRICS_HOST: z.string().default('127.0.0.1'),
  /** The worker's Prometheus port (ours, and the PostgreSQL gauges); unset: none (workers may share a host). */
  WORKER_METRICS_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** The Temporal SDK's own worker metrics, served by its core on a port of their own; unset: none. */
  WORKER_TEMPORAL_METRICS_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** The result host's Prometheus port; unset: none. */
  RESULT_METRICS_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
  /** A generation still queued this long after it was created counts as queued too long. */
  QUEUED_TOO_LONG_MS: int(10 * 60_000, 1_000),
  /** An OTLP/HTTP collector (http://host:4318): traces are sent there; unset: no tracing. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),

  RESULT_HOST: z.string().default('127.0.0.1'),
  RESULT_PORT: int(8081),
  /** The {result_host} of the spec: the public base URL of stored results. */
  RESULT_BASE_URL: z.string().url().optional(),
  STORAGE_DIR: z.string().default('.data/results'),
  /** A workflow bundle built ahead (bundleWorkflowCode) starts the worker faster; without one it bundles src/workflows. */
  WORKFLOW_BUNDLE_PATH: z.string().optional(),

  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = Omit<z.infer<typeof configSchema>, 'API_PUBLIC_URL' | 'RESULT_BASE_URL'> & {
  API_PUBLIC_URL: string;
  RESULT_BASE_URL: string;
};

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Parses the environment; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const c = parseEnv(configSchema, env);
  checkTemporalSecurity(c);
  if (c.API_HEADERS_TIMEOUT_MS > c.API_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      'Invalid configuration:\n  API_HEADERS_TIMEOUT_MS: must not exceed API_REQUEST_TIMEOUT_MS (the headers are part of the request)',
    );
  }
  const apiHost = c.API_HOST === '0.0.0.0' ? '127.0.0.1' : c.API_HOST;
  const resultHost = c.RESULT_HOST === '0.0.0.0' ? '127.0.0.1' : c.RESULT_HOST;
  return {
    ...c,
    API_PUBLIC_URL: (c.API_PUBLIC_URL ?? `http://${apiHost}:${c.API_PORT}/v1`).replace(/\/$/, ''),
    RESULT_BASE_URL: (c.RESULT_BASE_URL ?? `http://${resultHost}:${c.RESULT_PORT}`).replace(/\/$/, ''),
  };
}

/** Where `npm start` keeps its embedded servers' data and its dev-state file: DATA_DIR, or .data/ (git-ignored). */
const dataDir = z
  .string()
  .optional()
  .transform((dir) => path.resolve(dir ?? path.join(projectRoot, '.data')));

/**
 * `npm start`'s own settings, read before it has filled in the service's configuration: its data
 * folder, and the ports and namespace of the embedded servers it runs.
 */
const launcherSchema = configSchema.pick({ TEMPORAL_NAMESPACE: true }).extend({
  DATA_DIR: dataDir,
  EMBEDDED_POSTGRES_PORT: int(54329),
  TEMPORAL_DEV_PORT: int(7233),
  TEMPORAL_UI_PORT: int(8233),
});
type LauncherConfig = z.infer<typeof launcherSchema>;

export function loadLauncherConfig(env: NodeJS.ProcessEnv = process.env): LauncherConfig {
  return parseEnv(launcherSchema, env);
}

/**
 * What `npm run admin` reads. Without DATABASE_URL or TEMPORAL_ADDRESS it uses those of the
 * development service a running `npm start` recorded under DATA_DIR.
 */
const adminSchema = configSchema
  .pick({ DATABASE_URL: true, TEMPORAL_ADDRESS: true, TEMPORAL_NAMESPACE: true })
  .partial({ DATABASE_URL: true, TEMPORAL_ADDRESS: true })
  .extend({ DATA_DIR: dataDir, ...temporalSecurityShape });
type AdminConfig = z.infer<typeof adminSchema>;

export function loadAdminConfig(env: NodeJS.ProcessEnv = process.env): AdminConfig {
  return checkTemporalSecurity(parseEnv(adminSchema, env));
}

/** The Temporal security variables alone, checked: for the launcher's look at a Temporal of your own. */
export function loadTemporalSecurity(env: NodeJS.ProcessEnv = process.env): TemporalSecurity {
  return checkTemporalSecurity(parseEnv(z.object(temporalSecurityShape), env));
}

function checkTemporalSecurity<T extends TemporalSecurity>(c: T): T {
  const problems: string[] = [];
  if ((c.TEMPORAL_TLS_CERT === undefined) !== (c.TEMPORAL_TLS_KEY === undefined))
    problems.push(
      `${c.TEMPORAL_TLS_CERT ? 'TEMPORAL_TLS_KEY' : 'TEMPORAL_TLS_CERT'}: mTLS needs the client certificate and its key, both`,
    );
  const tlsSettings = [
    c.TEMPORAL_TLS_CERT && 'TEMPORAL_TLS_CERT',
    c.TEMPORAL_TLS_CA && 'TEMPORAL_TLS_CA',
    c.TEMPORAL_TLS_SERVER_NAME && 'TEMPORAL_TLS_SERVER_NAME',
  ].filter(Boolean);
  if (c.TEMPORAL_TLS === 'false' && tlsSettings.length > 0)
    problems.push(
      `TEMPORAL_TLS: false, yet ${tlsSettings.join(', ')} ${tlsSettings.length === 1 ? 'is' : 'are'} set`,
    );
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  return c;
}

/** What `npm run migrate` reads: only the database, which it never guesses. */
const migrateSchema = configSchema.pick({ DATABASE_URL: true });

export function loadMigrateConfig(env: NodeJS.ProcessEnv = process.env): z.infer<typeof migrateSchema> {
  return parseEnv(migrateSchema, env);
}

function parseEnv<Schema extends z.ZodType>(schema: Schema, env: NodeJS.ProcessEnv): z.output<Schema> {
  const parsed = schema.safeParse(env, parseOptions);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}

/** A bucket name as S3 and the stores that copy it allow. */
const bucketName = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** What is wrong with a STORAGE_URL, or null. */
function storageUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be file:///absolute/folder or s3://bucket[/prefix]';
  }
  if (url.protocol === 'file:') {
    try {
      fileURLToPath(url);
      return null;
    } catch {
      return 'must be a file URL of a folder on this machine: file:///absolute/folder';
    }
  }
  if (url.protocol !== 's3:') return 'must be file:///absolute/folder or s3://bucket[/prefix]';
  if (url.username || url.password)
    return 'must not hold credentials: they come from the AWS SDK chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, roles)';
  if (!bucketName.test(url.hostname)) return `names no valid bucket (s3://bucket[/prefix])`;
  if (url.search || url.hash) return 'must be s3://bucket[/prefix], without a query or fragment';
  return null;
}

/** Where this process stores and reads files: STORAGE_URL, or the folder STORAGE_DIR. */
export function storageLocation(config: Config): StorageLocation {
  const url = config.STORAGE_URL ? new URL(config.STORAGE_URL) : null;
  if (!url) return { kind: 'folder', dir: config.STORAGE_DIR };
  if (url.protocol === 'file:') return { kind: 'folder', dir: fileURLToPath(url) };
  const keyPrefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, '');
  return {
    kind: 'bucket',
    bucket: url.hostname,
    keyPrefix: keyPrefix ? `${keyPrefix}/` : '',
    ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
    ...(config.S3_REGION ? { region: config.S3_REGION } : {}),
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
  };
}

/** The step horizons a generation's workflow is started with. */
export function stepHorizons(config: Config): StepHorizons {
  return {
    admissionMs: config.ADMISSION_HORIZON_MS,
    submitMs: config.SUBMIT_HORIZON_MS,
    providerWaitMs: config.PROVIDER_WAIT_HORIZON_MS,
    persistMs: config.PERSIST_HORIZON_MS,
    bookkeepingMs: config.BOOKKEEPING_HORIZON_MS,
  };
}

/** The providers this process has credentials for (the simulated one needs none). */
export function providersWithCredentials(config: Config): Set<ProviderName> {
  const names = new Set<ProviderName>(['simulated']);
  if (config.FAL_KEY) names.add('fal');
  if (config.REPLICATE_API_TOKEN) names.add('replicate');
  if (config.OPENAI_API_KEY) names.add('openai');
  return names;
}

/** Each provider account's cap on jobs in flight (0: none). */
export function inFlightCaps(config: Config): Record<ProviderName, number> {
  return {
    simulated: config.SIM_PROVIDER_MAX_IN_FLIGHT,
    fal: config.FAL_MAX_IN_FLIGHT,
    replicate: config.REPLICATE_MAX_IN_FLIGHT,
    openai: config.OPENAI_MAX_IN_FLIGHT,
  };
}

/** The variable that would give each provider its credentials. */
export const providerCredentialVariables: Record<ProviderName, string | null> = {
  simulated: null,
  fal: 'FAL_KEY',
  replicate: 'REPLICATE_API_TOKEN',
  openai: 'OPENAI_API_KEY',
};

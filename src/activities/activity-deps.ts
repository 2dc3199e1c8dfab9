import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import type { ProviderName } from '../catalog/provider-mapping.js';
import type { GenerationMetrics } from '../observability/metrics.js';
import type { Provider } from '../providers/provider.js';
import type { DownloadPolicy } from '../providers/provider-http.js';
import type { Resolve } from '../net/pinned-connection.js';
import type { WebhookTargetRules } from '../net/webhook-target.js';
import type { Storage } from '../storage/storage.js';
import type { BatchLineAdmission, BatchTiming } from './batch-line-admission.js';

/** The worker's resources every activity factory is built from; each factory picks the ones it uses. */
export interface ActivityDeps {
  db: CommonQueryMethods;
  /** A provider by name (a catalog entry's `provider.name`, or `simulated`). */
  providerFor: (name: ProviderName) => Provider;
  storage: Storage;
  /** Jobs a provider account may have in flight (0 or absent: no cap); more wait in our queue. */
  inFlightCap?: (name: ProviderName) => number;
  /** The share of a provider's cap that batch lines may hold together (absent: 1, all of it). */
  batchProviderShare?: number;
  /** Generations an account may have in flight at once. */
  concurrencyLimit: number;
  /** A Temporal client (connected on first use), for the reconciliation sweep. */
  temporal: () => Promise<Client>;
  /** How often persistResults says it is alive while it copies (default 30 s; its heartbeat timeout is 2 minutes). */
  persistHeartbeatMs?: number;
  /**
   * How long other submit attempts leave a claim to an attempt that stopped renewing it (a worker
   * that died or hangs): default 60 s, longer than any adapter's create deadline. Tests shorten it.
   */
  submitClaimWindowMs?: number;
  /**
   * What fetching a customer's reference image may reach besides public HTTPS addresses
   * (OUTBOUND_ALLOW_CIDRS; tests add their own certificate). Absent: public HTTPS only.
   */
  referenceImageFetch?: DownloadPolicy;
  /**
   * What webhook deliveries may reach besides public HTTPS addresses (WEBHOOK_ALLOW_CIDRS,
   * WEBHOOK_ALLOW_LOOPBACK_HTTP), and how their names are resolved (WEBHOOK_DNS_*; tests add their
   * own certificate, and a resolver whose answer changes, as a rebinding DNS server's would).
   * Absent: public HTTPS only, names resolved by the default webhook resolver.
   */
  webhookDelivery?: WebhookTargetRules & { extraCa?: readonly string[]; resolve?: Resolve };
  /**
   * Webhook deliveries of one account in flight at once, across workers
   * (WEBHOOK_DELIVERIES_PER_ACCOUNT; default 20): the others wait their turn.
   */
  webhookDeliveriesPerAccount?: number;
  /**
   * PROVIDER_WEBHOOK_BASE_URL: the public origin providers push a job's end to (absent: no push
   * URL is sent, and fal's and Replicate's jobs are polled).
   */
  providerWebhookBaseUrl?: string;
  /** Counts each generation's outcomes where they commit (absent: nothing is counted). */
  metrics?: GenerationMetrics;
  /** How batches' lines are admitted and stopped (absent: this worker's batch activities fail, retried). */
  batchLines?: BatchLineAdmission;
  /** How often a batch's slice looks in PostgreSQL, and how long it runs (BATCH_POLL_INTERVAL_MS, BATCH_SLICE_MS). */
  batchTiming?: BatchTiming;
  /**
   * Lines of one account's batches in flight at once, across its batches and workers
   * (BATCH_LINES_IN_FLIGHT_PER_ACCOUNT; absent: no bound but each batch's own).
   */
  batchLinesPerAccount?: number;
}

import { z } from 'zod';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { addressRanges, baseUrl, blankIsUnset, int, secret, settingGroup } from './setting.js';

/**
 * Real providers. A provider without its key is not offered: its catalog models are left out of
 * GET /v1/models and refused as unknown at POST. The URLs may point anywhere speaking the same
 * protocol (a proxy, a regional endpoint, a test server). Keys never reach a log line.
 */
export const providerSettings = settingGroup({
  title: 'Providers and outbound fetching',
  shape: {
    FAL_KEY: secret,
    FAL_QUEUE_URL: baseUrl('https://queue.fal.run'),
    REPLICATE_API_TOKEN: secret,
    REPLICATE_API_URL: baseUrl('https://api.replicate.com/v1'),
    FAL_JWKS_URL: baseUrl('https://rest.alpha.fal.ai/.well-known/jwks.json'),
    OPENAI_API_KEY: secret,
    OPENAI_BASE_URL: baseUrl('https://api.openai.com/v1'),
    PROVIDER_WEBHOOK_BASE_URL: blankIsUnset(
      z
        .string()
        .url()
        .refine(
          (url) => /^https?:$/.test(new URL(url).protocol) && ['', '/'].includes(new URL(url).pathname),
          {
            message: 'must be an origin (scheme, host and port), such as https://api.example.com',
          },
        )
        .transform((url) => url.replace(/\/+$/, '')),
    ),
    FAL_MAX_IN_FLIGHT: int(10),
    REPLICATE_MAX_IN_FLIGHT: int(20),
    OPENAI_MAX_IN_FLIGHT: int(5),
    SIM_PROVIDER_MAX_IN_FLIGHT: int(0),
    // Each provider account's request budget (0: none). Replicate publishes its limits; fal limits
    // jobs running at once, not requests; OpenAI's depend on the model and the account's tier.
    FAL_CREATES_PER_MINUTE: int(0),
    FAL_REQUESTS_PER_MINUTE: int(0),
    REPLICATE_CREATES_PER_MINUTE: int(600),
    REPLICATE_REQUESTS_PER_MINUTE: int(3_000),
    OPENAI_CREATES_PER_MINUTE: int(0),
    OPENAI_REQUESTS_PER_MINUTE: int(0),
    PROVIDER_BUDGET_FALLBACK_SHARE: z.coerce.number().gt(0).max(1).default(0.5),
    PROVIDER_BUDGET_CREATE_WAIT_MS: int(1_000),
    PROVIDER_BUDGET_READ_WAIT_MS: int(5_000),
    BATCH_PROVIDER_SHARE: z.coerce.number().gt(0).max(1).default(0.8),
    PROVIDER_DOWN_AFTER_FAILURES: int(5, 1),
    PROVIDER_PROBE_INTERVAL_MS: int(30_000, 100),
    SIM_PROVIDER_DELAY_MS: int(3_000),
    OUTBOUND_ALLOW_CIDRS: addressRanges(),
    // The Standard Webhooks schedule after the first (immediate) attempt: 5 s, 5 min, 30 min, 2 h,
    // 5 h, 10 h, 14 h, 20 h, 24 h.
    WEBHOOK_RETRY_DELAYS_MS: z
      .string()
      .default('5000,300000,1800000,7200000,18000000,36000000,50400000,72000000,86400000')
      .transform((value) =>
        value
          .split(/[\s,]+/)
          .filter(Boolean)
          .map(Number),
      )
      .refine((delays) => delays.every((ms) => Number.isInteger(ms) && ms >= 0), {
        message: 'must be comma-separated whole milliseconds',
      }),
  },
  docs: {
    FAL_KEY: {
      readBy: ['api', 'worker'],
      text: 'fal’s key (sent as `Authorization: Key …`). Unset: fal’s models are not offered, and the API takes no fal webhooks.',
    },
    FAL_QUEUE_URL: { readBy: ['worker'], text: 'fal’s queue API, or anything speaking its protocol.' },
    REPLICATE_API_TOKEN: {
      readBy: ['api', 'worker'],
      text: 'Replicate’s token. Unset: Replicate’s models are not offered (and the API takes no Replicate webhooks: it reads their secret with it).',
    },
    REPLICATE_API_URL: {
      readBy: ['api', 'worker'],
      text: 'Replicate’s HTTP API, or anything speaking its protocol. The API reads the account’s webhook secret from it (`/webhooks/default/secret`) to verify Replicate’s pushes.',
    },
    FAL_JWKS_URL: {
      readBy: ['api'],
      text: 'fal’s public keys (a JWKS) that its webhooks are verified with; fetched when first needed and kept up to 24 hours. See [Provider webhooks](operating.md#provider-webhooks).',
    },
    OPENAI_API_KEY: {
      readBy: ['api', 'worker'],
      text: 'OpenAI’s key. Unset: OpenAI’s models are not offered.',
    },
    OPENAI_BASE_URL: { readBy: ['worker'], text: 'OpenAI’s API, or anything speaking its protocol.' },
    PROVIDER_WEBHOOK_BASE_URL: {
      readBy: ['api', 'worker'],
      text: 'The public origin (scheme, host and port) at which fal and Replicate reach the API: set, every fal and Replicate job is sent a webhook URL on it (`/provider-webhooks/…`) and polling becomes a slow fallback. Unset (as under `npm start`, where providers cannot reach a laptop): jobs are polled every `PROVIDER_POLL_INTERVAL_MS`. See [Provider webhooks](operating.md#provider-webhooks) and [Provider push](providers.md#provider-push).',
      default: '(none: polling)',
    },
    FAL_MAX_IN_FLIGHT: {
      readBy: ['worker'],
      text: 'Jobs the fal account may have in flight at once; more wait in our queue (`queued`) instead of collecting 429s. 0: no cap.',
    },
    REPLICATE_MAX_IN_FLIGHT: { readBy: ['worker'], text: 'The same for Replicate.' },
    OPENAI_MAX_IN_FLIGHT: { readBy: ['worker'], text: 'The same for OpenAI (calls made at once).' },
    SIM_PROVIDER_MAX_IN_FLIGHT: {
      readBy: ['worker'],
      text: 'The same for the simulated provider (0: no cap).',
    },
    FAL_CREATES_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Creates the fal account is sent per minute, by all workers together (0: no budget). fal publishes no request rate: it limits the requests running at once, and queues the rest. See [The request budget](providers.md#the-request-budget).',
    },
    FAL_REQUESTS_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Every other request to fal (status and result reads, cancels, probes) per minute, by all workers together (0: no budget).',
    },
    REPLICATE_CREATES_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Creates the Replicate account is sent per minute, by all workers together: Replicate’s published limit (0: no budget). Raise it when Replicate grants more.',
    },
    REPLICATE_REQUESTS_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Every other request to Replicate per minute, by all workers together: Replicate’s published limit for all other endpoints (0: no budget).',
    },
    OPENAI_CREATES_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Image calls OpenAI is sent per minute, by all workers together (0: no budget; `OPENAI_MAX_IN_FLIGHT` still caps the calls at once). OpenAI’s limit depends on the model and the account’s usage tier: set it from the account’s limits page.',
    },
    OPENAI_REQUESTS_PER_MINUTE: {
      readBy: ['worker'],
      text: 'Every other request to OpenAI (its probe) per minute (0: no budget).',
    },
    PROVIDER_BUDGET_FALLBACK_SHARE: {
      readBy: ['worker'],
      text: 'The share (0 to 1) of a provider’s burst allowance that fallback status reads (a read while a webhook is expected) may use: past it they are skipped (the job counts as still running and is read again later), so that pushed reads, results and cancels keep their turn.',
    },
    PROVIDER_BUDGET_CREATE_WAIT_MS: {
      readBy: ['worker'],
      text: 'How long a create waits for its turn in the budget; past it the submit fails as throttled, nothing sent, keeping its turn (up to 60 s ahead), and is retried when the turn comes (a routed generation may take its next route).',
    },
    PROVIDER_BUDGET_READ_WAIT_MS: {
      readBy: ['worker'],
      text: 'How long a status read, result read or cancel waits for its turn in the budget (or for a provider’s `429` pause to end); past it the call fails as throttled and is retried.',
    },
    BATCH_PROVIDER_SHARE: {
      readBy: ['worker'],
      text: "The share (0 to 1) of a capped provider's in-flight places that batch lines may hold together; the rest are kept for generations created on their own, which also go first for any place that frees. Batch lines may always hold at least one place, but never a provider's last one unless this is 1: a provider with one place serves them only then (otherwise they go to their model's next route, or wait).",
    },
    PROVIDER_DOWN_AFTER_FAILURES: {
      readBy: ['worker'],
      text: 'Failures in a row (unreachable, 5xx, lost answers, refused credentials; never 429s) that take a provider down.',
    },
    PROVIDER_PROBE_INTERVAL_MS: {
      readBy: ['worker'],
      text: 'While a provider is down: how often it is probed, and the `Retry-After` its refused POSTs get.',
    },
    SIM_PROVIDER_DELAY_MS: { readBy: ['worker'], text: 'The simulated provider’s time per job.' },
    OUTBOUND_ALLOW_CIDRS: {
      readBy: ['api', 'worker'],
      text: 'Non-public ranges (CIDRs or addresses, comma-separated) the service’s own fetches (images, results) may reach: an internal image mirror, say. Not webhooks (`WEBHOOK_ALLOW_CIDRS`). Cloud metadata stays refused. See [Outbound fetching](providers.md#outbound-fetching).',
      default: '(none)',
    },
    WEBHOOK_RETRY_DELAYS_MS: {
      readBy: ['api'],
      text: 'The waits before each retry of a webhook delivery, in ms, comma-separated (the first attempt is immediate; each wait is jittered ±10 %). A generation keeps the schedule it started with.',
      default: '5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h',
    },
  },
});

type ProviderConfig = z.output<z.ZodObject<typeof providerSettings.shape>>;

/** The providers this process has credentials for (the simulated one needs none). */
export function providersWithCredentials(config: ProviderConfig): Set<ProviderName> {
  const names = new Set<ProviderName>(['simulated']);
  if (config.FAL_KEY) names.add('fal');
  if (config.REPLICATE_API_TOKEN) names.add('replicate');
  if (config.OPENAI_API_KEY) names.add('openai');
  return names;
}

/** Each provider account's cap on jobs in flight (0: none). */
export function inFlightCaps(config: ProviderConfig): Record<ProviderName, number> {
  return {
    simulated: config.SIM_PROVIDER_MAX_IN_FLIGHT,
    fal: config.FAL_MAX_IN_FLIGHT,
    replicate: config.REPLICATE_MAX_IN_FLIGHT,
    openai: config.OPENAI_MAX_IN_FLIGHT,
  };
}

/** Each provider account's request budget: creates, and every other request, per minute (0: none). */
export function requestBudgets(
  config: ProviderConfig,
): Record<Exclude<ProviderName, 'simulated'>, { createsPerMinute: number; requestsPerMinute: number }> {
  return {
    fal: {
      createsPerMinute: config.FAL_CREATES_PER_MINUTE,
      requestsPerMinute: config.FAL_REQUESTS_PER_MINUTE,
    },
    replicate: {
      createsPerMinute: config.REPLICATE_CREATES_PER_MINUTE,
      requestsPerMinute: config.REPLICATE_REQUESTS_PER_MINUTE,
    },
    openai: {
      createsPerMinute: config.OPENAI_CREATES_PER_MINUTE,
      requestsPerMinute: config.OPENAI_REQUESTS_PER_MINUTE,
    },
  };
}

/** The variable that would give each provider its credentials. */
export const providerCredentialVariables: Record<ProviderName, string | null> = {
  simulated: null,
  fal: 'FAL_KEY',
  replicate: 'REPLICATE_API_TOKEN',
  openai: 'OPENAI_API_KEY',
};

import type { z } from 'zod';
import type { StepHorizons } from '../workflows/generation-types.js';
import { int, settingGroup } from './setting.js';

/** A generation's life: admission, its steps' horizons, reconciliation, and how long things are kept. */
export const generationSettings = settingGroup({
  title: 'Generations: admission, step horizons, reconciliation',
  shape: {
    CONCURRENT_GENERATIONS_PER_ACCOUNT: int(10, 1),
    CANCEL_AFTER_MIN_SECONDS: int(5, 1),
    ADMISSION_TIMEOUT_MS: int(10_000, 100),
    // Keep 2 × this under ADMISSION_TIMEOUT_MS.
    PROVIDER_SUBMIT_TIMEOUT_MS: int(3_000, 10),
    PROVIDER_POLL_INTERVAL_MS: int(2_000, 10),
    PROVIDER_FALLBACK_READ_INTERVAL_MS: int(30_000, 10),
    // Admission's horizon must leave the handover room within ADMISSION_TIMEOUT_MS.
    ADMISSION_HORIZON_MS: int(4_000, 100),
    SUBMIT_HORIZON_MS: int(3_600_000, 1_000),
    // Longer than the adapters' own create deadline (20 s): past it, no create's answer can still come.
    SUBMIT_CLAIM_WINDOW_MS: int(60_000, 25_000),
    PROVIDER_WAIT_HORIZON_MS: int(6 * 3_600_000, 1_000),
    PERSIST_HORIZON_MS: int(6 * 3_600_000, 1_000),
    BOOKKEEPING_HORIZON_MS: int(24 * 3_600_000, 1_000),
    RECONCILE_INTERVAL_MS: int(5 * 60_000, 1_000),
    RECONCILE_GRACE_MS: int(15 * 60_000, 0),
  },
  docs: {
    CONCURRENT_GENERATIONS_PER_ACCOUNT: {
      readBy: ['worker'],
      text: 'Generations `queued` at once per account; more get `429 concurrency_limit_exceeded`, nothing charged.',
    },
    CANCEL_AFTER_MIN_SECONDS: {
      readBy: ['api'],
      text: 'The shortest `Cancel-After` a POST may send (Replicate’s minimum, 5 s); up to 24 h is accepted. The tests shorten it.',
    },
    ADMISSION_TIMEOUT_MS: {
      readBy: ['api'],
      text: 'POST answers `503 service_unavailable` if admission and handover take longer (retry with the same key).',
    },
    PROVIDER_SUBMIT_TIMEOUT_MS: {
      readBy: ['api'],
      text: 'Each of the two submit attempts inside POST; then submission goes on in the background and the 202 shows `queued`. Keep 2 × this under `ADMISSION_TIMEOUT_MS`.',
    },
    PROVIDER_POLL_INTERVAL_MS: {
      readBy: ['api'],
      text: 'How often a job is read at its provider when no push of its end can come (no `PROVIDER_WEBHOOK_BASE_URL`, OpenAI’s synchronous calls).',
    },
    PROVIDER_FALLBACK_READ_INTERVAL_MS: {
      readBy: ['worker'],
      text: 'When the provider will push a job’s end (fal and Replicate with `PROVIDER_WEBHOOK_BASE_URL`, the simulated provider): the fallback reads’ interval, the first coming after the model’s `expected_run_seconds` and a grace of this or 10 s, whichever is less. See [Provider push](providers.md#provider-push).',
    },
    ADMISSION_HORIZON_MS: {
      readBy: ['api'],
      text: 'The debit (the workflow’s first step: concurrency slot, price, credits taken) is retried this long, then the POST is refused. See [Step horizons](api/generations.md#step-horizons-and-failures-no-retry-can-fix).',
    },
    SUBMIT_HORIZON_MS: {
      readBy: ['api'],
      text: 'A provider that does not take the job by then: refunded, or review if it may have it.',
    },
    SUBMIT_CLAIM_WINDOW_MS: {
      readBy: ['worker'],
      text: 'How long a submit whose worker died (or hangs) keeps its claim before another attempt takes it over: then a create that may have been sent is asked about, or sent to review. Never under 25 s (the providers’ create deadline is 20 s); the fault tests shorten it.',
    },
    PROVIDER_WAIT_HORIZON_MS: {
      readBy: ['api', 'worker'],
      text: 'A job not finished by then is given up, cancelled at the provider and refunded.',
    },
    PERSIST_HORIZON_MS: {
      readBy: ['api', 'worker'],
      text: 'Persistence recovery retries this long, then refunds.',
    },
    BOOKKEEPING_HORIZON_MS: {
      readBy: ['api'],
      text: 'Refunds, review marks and content expiry retry this long.',
    },
    RECONCILE_INTERVAL_MS: { readBy: ['worker'], text: 'How often the reconciliation schedule runs.' },
    RECONCILE_GRACE_MS: {
      readBy: ['worker'],
      text: 'A queued generation untouched this long, with no workflow of its own, is reconciled.',
    },
  },
});

/** How long what a generation leaves behind is kept, and the schedule that prunes the rest. */
export const retentionSettings = settingGroup({
  title: 'Retention and pruning',
  shape: {
    RESULT_RETENTION_MS: int(30 * 24 * 3600 * 1000, 1),
    IDEMPOTENCY_RETENTION_MS: int(180 * 24 * 3600 * 1000, 1),
    PRUNE_INTERVAL_MS: int(3_600_000, 0),
    PRUNE_BATCH_SIZE: int(5_000, 1),
    PRUNE_MAX_BATCHES: int(20, 1),
    REQUEST_LOG_RETENTION_MS: int(90 * 24 * 3600 * 1000, 0),
    // Never less than IDEMPOTENCY_RETENTION_MS: a 402 answers for its key.
    REJECTED_RETENTION_MS: int(180 * 24 * 3600 * 1000, 0),
    // Longer than every step's horizon.
    SIM_PROVIDER_JOB_RETENTION_MS: int(7 * 24 * 3600 * 1000, 0),
  },
  docs: {
    RESULT_RETENTION_MS: {
      readBy: ['api'],
      text: 'Results are kept this long after storage (`expires_at`; the spec: 30 days).',
    },
    IDEMPOTENCY_RETENTION_MS: {
      readBy: ['api', 'worker'],
      text: 'How long an Idempotency-Key names its generation (the spec: at least 180 days).',
    },
    PRUNE_INTERVAL_MS: {
      readBy: ['worker'],
      text: 'How often the pruning schedule runs (0: no schedule, nothing is pruned). See [Pruning](api/generations.md#the-key-horizon-pruning-and-capacity).',
    },
    PRUNE_BATCH_SIZE: {
      readBy: ['worker'],
      text: 'Rows each delete statement of the pruning removes at most.',
    },
    PRUNE_MAX_BATCHES: { readBy: ['worker'], text: 'Delete statements per table and pruning run at most.' },
    REQUEST_LOG_RETENTION_MS: {
      readBy: ['worker'],
      text: 'The API request log is kept this long (0: forever).',
    },
    REJECTED_RETENTION_MS: {
      readBy: ['worker'],
      text: 'Rejected generations are kept this long, and never less than `IDEMPOTENCY_RETENTION_MS` (0: forever).',
    },
    SIM_PROVIDER_JOB_RETENTION_MS: {
      readBy: ['worker'],
      text: 'The simulated provider’s jobs are kept this long after submission (0: forever).',
    },
  },
});

type Horizons = z.output<z.ZodObject<typeof generationSettings.shape>>;

/** The step horizons a generation's workflow is started with. */
export function stepHorizons(config: Horizons): StepHorizons {
  return {
    admissionMs: config.ADMISSION_HORIZON_MS,
    submitMs: config.SUBMIT_HORIZON_MS,
    providerWaitMs: config.PROVIDER_WAIT_HORIZON_MS,
    persistMs: config.PERSIST_HORIZON_MS,
    bookkeepingMs: config.BOOKKEEPING_HORIZON_MS,
  };
}

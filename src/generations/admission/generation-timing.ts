import { stepHorizons, type Config } from '../../config/service-config.js';
import type { GenerationStart } from '../../workflows/generation-types.js';

/**
 * The step timings a generation starts with (they travel in its start, so a running story keeps its
 * own), built alike by every process that admits generations (the API, the console).
 */
export function generationTiming(config: Config): GenerationStart['timing'] {
  return {
    submitTimeoutMs: config.PROVIDER_SUBMIT_TIMEOUT_MS,
    pollIntervalMs: config.PROVIDER_POLL_INTERVAL_MS,
    resultRetentionMs: config.RESULT_RETENTION_MS,
    idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
    horizons: stepHorizons(config),
  };
}

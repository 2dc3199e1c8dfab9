import type { Logger } from 'pino';
import { stepHorizons, type Config } from '../config.js';
import type { GenerationStart } from '../workflows/generation-types.js';
import { MemoryAuthLimits, type AuthLimits } from './rate-limit.js';
import { RedisAuthLimits } from './redis-limits.js';

/**
 * What every process that admits generations or judges keys (the API, the console) builds the same
 * way from the configuration, so that neither holds a second copy of a rule.
 */

/** The per-key and failed-authentication limits: shared through Redis when REDIS_URL is set. */
export async function authLimitsFor(config: Config, logger: Logger): Promise<AuthLimits> {
  return config.REDIS_URL
    ? await RedisAuthLimits.connect({
        url: config.REDIS_URL,
        requestsPerKey: config.RATE_LIMIT_PER_MINUTE,
        commandTimeoutMs: config.REDIS_TIMEOUT_MS,
        logger: logger.child({ component: 'rate-limits' }),
      })
    : new MemoryAuthLimits(config.RATE_LIMIT_PER_MINUTE);
}

/** The step timings a generation starts with (they travel in its start, so a running story keeps its own). */
export function generationTiming(config: Config): GenerationStart['timing'] {
  return {
    submitTimeoutMs: config.PROVIDER_SUBMIT_TIMEOUT_MS,
    pollIntervalMs: config.PROVIDER_POLL_INTERVAL_MS,
    resultRetentionMs: config.RESULT_RETENTION_MS,
    idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
    horizons: stepHorizons(config),
  };
}

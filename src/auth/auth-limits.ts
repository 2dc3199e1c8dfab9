import type { Logger } from 'pino';
import { MemoryAuthLimits, type AuthLimits } from './rate-limit.js';
import { RedisAuthLimits } from './redis-limits.js';

/**
 * The per-key and failed-authentication limits, built alike by every process that judges keys (the
 * API, the console), so that neither holds a second copy of the rule: shared through Redis when
 * REDIS_URL is set, else counted in this process's memory. Takes the settings it reads (the
 * service's Config fits), so that this room needs nothing from the configuration's.
 */
export async function authLimitsFor(
  settings: { REDIS_URL?: string; RATE_LIMIT_PER_MINUTE: number; REDIS_TIMEOUT_MS: number },
  logger: Logger,
): Promise<AuthLimits> {
  return settings.REDIS_URL
    ? await RedisAuthLimits.connect({
        url: settings.REDIS_URL,
        requestsPerKey: settings.RATE_LIMIT_PER_MINUTE,
        commandTimeoutMs: settings.REDIS_TIMEOUT_MS,
        logger: logger.child({ component: 'rate-limits' }),
      })
    : new MemoryAuthLimits(settings.RATE_LIMIT_PER_MINUTE);
}

import type { Logger } from 'pino';

export interface DependencyWaitOptions {
  /** First pause after a failed attempt; each next one doubles, up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** How long to keep trying before giving up (the caller then exits, for its supervisor to restart it). */
  timeoutMs: number;
  /** Tests shorten the pauses; production uses setTimeout. */
  sleep?: (ms: number) => Promise<void>;
}

export class DependencyWaitTimedOut extends Error {
  override readonly name = 'DependencyWaitTimedOut';
}

/**
 * Tries `attempt` until it succeeds, pausing with exponential backoff in between, and says so:
 * one warning per failed attempt naming the dependency, where we look for it, why it failed and
 * when we try again; one line when it answers. Processes start in any order (a container
 * platform starts them together), so a dependency still starting is no reason to exit.
 */
export async function waitForDependency(
  dependency: { name: string; target: string },
  attempt: () => Promise<unknown>,
  logger: Logger,
  options: DependencyWaitOptions,
): Promise<void> {
  const { initialDelayMs = 500, maxDelayMs = 15_000, timeoutMs } = options;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const startedAt = Date.now();
  let delayMs = initialDelayMs;
  for (let attempts = 1; ; attempts++) {
    try {
      await attempt();
      if (attempts > 1)
        logger.info(
          {
            dependency: dependency.name,
            target: dependency.target,
            attempts,
            waitedMs: Date.now() - startedAt,
          },
          `${dependency.name} answers at ${dependency.target}`,
        );
      return;
    } catch (error) {
      const reason = describe(error);
      const waitedMs = Date.now() - startedAt;
      if (waitedMs + delayMs > timeoutMs)
        throw new DependencyWaitTimedOut(
          `${dependency.name} at ${dependency.target} did not answer in ${Math.round(waitedMs / 1000)} s (${attempts} attempts; last: ${reason})`,
        );
      logger.warn(
        {
          dependency: dependency.name,
          target: dependency.target,
          attempt: attempts,
          retryInMs: delayMs,
          reason,
        },
        `waiting for ${dependency.name} at ${dependency.target}: ${reason}; next attempt in ${(delayMs / 1000).toFixed(1)} s`,
      );
      await sleep(delayMs);
      delayMs = Math.min(maxDelayMs, delayMs * 2);
    }
  }
}

/** An error's message and, when it has one, its code: enough to tell a refused port from a bad password. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const message = error.message || error.name;
  return (typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message).slice(
    0,
    300,
  );
}

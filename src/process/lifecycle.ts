import type { Logger } from 'pino';
import { ConfigError, loadConfig, type Config } from '../config/service-config.js';
import { databaseTarget, probeDatabase } from '../db/pool.js';
import { waitForDependency } from '../dependencies/wait.js';
import { probeTemporal, temporalConnectionOptions } from '../temporal/connection-options.js';

/** Closes cleanly on SIGINT or SIGTERM; a second signal exits at once. */
export function runUntilSignal(logger: Logger, close: () => Promise<void>): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) process.exit(1);
    closing = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** Prints a configuration error as a plain message instead of a stack trace. */
export function exitOnConfigError(error: unknown): never {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  throw error;
}

/** loadConfig for entry points: a bad variable ends the process with a readable message. */
export function loadConfigOrExit(): Config {
  return loadOrExit(loadConfig);
}

/** Any of config/service-config.ts's loaders, for an entry point: a bad variable ends the process with a readable message. */
export function loadOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (error) {
    return exitOnConfigError(error);
  }
}

/** Tells a parent that started this process with an IPC channel (`npm start`) that it is serving. */
export function reportReady(): void {
  process.send?.('ready');
}

/**
 * At start, waits for PostgreSQL and Temporal with backoff, logging each failed attempt, and exits
 * (status 1, for the supervisor to restart it) if one is still away after DEPENDENCY_WAIT_TIMEOUT_MS.
 * `temporal: 'background'` (the API) waits for PostgreSQL only and watches Temporal without
 * holding the start: reads work without Temporal, and POST answers 503 until it is back.
 */
export async function waitForDependenciesOrExit(
  config: Config,
  logger: Logger,
  temporal: 'wait' | 'background',
): Promise<void> {
  const options = { timeoutMs: config.DEPENDENCY_WAIT_TIMEOUT_MS };
  const temporalOptions = temporalConnectionOptions(config.TEMPORAL_ADDRESS, config);
  const waitForTemporal = () =>
    waitForDependency(
      { name: 'Temporal', target: config.TEMPORAL_ADDRESS },
      () => probeTemporal(temporalOptions),
      logger,
      options,
    );
  try {
    await Promise.all([
      waitForDependency(
        { name: 'PostgreSQL', target: databaseTarget(config.DATABASE_URL) },
        () => probeDatabase(config.DATABASE_URL),
        logger,
        options,
      ),
      temporal === 'wait' ? waitForTemporal() : undefined,
    ]);
  } catch (error) {
    logger.fatal({ err: error }, (error as Error).message);
    process.exit(1);
  }
  if (temporal === 'background')
    waitForTemporal().catch((error: unknown) =>
      logger.error({ err: error }, `${(error as Error).message}; POST answers 503 until it does`),
    );
}

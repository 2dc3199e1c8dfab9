import type { Logger } from 'pino';
import { ConfigError, loadConfig, type Config } from './config.js';

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

/** Any of config.ts's loaders, for an entry point: a bad variable ends the process with a readable message. */
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

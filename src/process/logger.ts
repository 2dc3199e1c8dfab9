import { pino, type LevelWithSilent, type Logger } from 'pino';

/**
 * JSON logs on stdout; `name` says which process wrote the line, `level` comes from the
 * configuration (LOG_LEVEL). Keys and tokens never reach a log.
 */
export function createLogger(name: string, level: LevelWithSilent): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', '*.key', '*.apiKey'],
      censor: '[redacted]',
    },
  });
}

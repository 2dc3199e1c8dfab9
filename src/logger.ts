import { pino, type Logger } from 'pino';

/** JSON logs on stdout; `name` says which process wrote the line. Keys and tokens never reach a log. */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name,
    level,
    redact: {
      paths: ['req.headers.authorization', 'req.headers["x-api-key"]', '*.key', '*.apiKey'],
      censor: '[redacted]',
    },
  });
}

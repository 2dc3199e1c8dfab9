import { z } from 'zod';
import { int, optionalPort, settingGroup } from './setting.js';

/** Logs, Prometheus ports and tracing. Every metrics port is off until set. */
export const observabilitySettings = settingGroup({
  title: 'Logs, metrics and tracing',
  shape: {
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    METRICS_HOST: z.string().default('127.0.0.1'),
    METRICS_PORT: optionalPort(),
    WORKER_METRICS_PORT: optionalPort(),
    WORKER_TEMPORAL_METRICS_PORT: optionalPort(),
    RESULT_METRICS_PORT: optionalPort(),
    QUEUED_TOO_LONG_MS: int(10 * 60_000, 1_000),
    OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  },
  docs: {
    LOG_LEVEL: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'JSON logs on stdout: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. Keys never appear in them.',
    },
    METRICS_HOST: {
      readBy: ['api', 'worker', 'result-host'],
      text: 'Where every metrics port listens: loopback unless Prometheus scrapes from another host.',
    },
    METRICS_PORT: {
      readBy: ['api'],
      text: 'The API’s Prometheus port (`GET /metrics`), off the public port and the request log. Unset: none.',
    },
    WORKER_METRICS_PORT: {
      readBy: ['worker'],
      text: 'The worker’s Prometheus port: our metrics and the PostgreSQL gauges. Unset: none (workers may share a host).',
    },
    WORKER_TEMPORAL_METRICS_PORT: {
      readBy: ['worker'],
      text: 'The Temporal SDK’s own worker metrics, served by its core. Unset: none.',
    },
    RESULT_METRICS_PORT: { readBy: ['result-host'], text: 'The result host’s Prometheus port. Unset: none.' },
    QUEUED_TOO_LONG_MS: {
      readBy: ['worker'],
      text: 'A generation still queued this long after creation counts as queued too long (`generations_queued_too_long`).',
    },
    OTEL_EXPORTER_OTLP_ENDPOINT: {
      readBy: ['api', 'worker'],
      text: 'An OTLP/HTTP collector (`http://otel-collector:4318`): traces are sent there. Unset: no tracing.',
    },
  },
});

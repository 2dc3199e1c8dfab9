import { DefaultLogger, Runtime, type LogEntry, type LogLevel } from '@temporalio/worker';
import type { Logger } from 'pino';

const pinoLevel: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK's worker metrics the Grafana dashboard reads (as installTemporalRuntime names them);
 * the metrics test checks that a real worker serves each one.
 */
export const temporalSdkMetricNames = [
  'temporal_worker_task_slots_available',
  'temporal_worker_task_slots_used',
  'temporal_num_pollers',
  'temporal_sticky_cache_size',
  'temporal_workflow_task_schedule_to_start_latency_seconds',
  'temporal_workflow_task_execution_latency_seconds',
  'temporal_activity_schedule_to_start_latency_seconds',
  'temporal_activity_execution_latency_seconds',
  'temporal_request_latency_seconds',
] as const;

/**
 * Sends the SDK's own logs (worker state, workflow and activity logs) through our JSON logger and,
 * given `metricsAddress` (host:port), serves the SDK's own worker metrics there in Prometheus's
 * format (task slots, poll and schedule-to-start latencies, sticky cache, workflow and activity
 * outcomes), named the Prometheus way: seconds, and `_total` on counters. Call once, first.
 */
export function installTemporalRuntime(logger: Logger, metricsAddress?: string): void {
  Runtime.install({
    logger: new DefaultLogger('INFO', temporalLogSink(logger)),
    ...(metricsAddress
      ? {
          telemetryOptions: {
            metrics: {
              prometheus: {
                bindAddress: metricsAddress,
                countersTotalSuffix: true,
                unitSuffix: true,
                useSecondsForDurations: true,
              },
            },
          },
        }
      : {}),
  });
}

/**
 * One SDK log entry as one JSON line. The SDK puts a failure under `error`; pino serializes
 * errors (message, type, stack) only under `err`, and would print `{}`.
 */
export function temporalLogSink(logger: Logger): (entry: LogEntry) => void {
  return ({ level, message, meta }) => {
    const { error, ...rest } = meta ?? {};
    // The provider-wait worker has no workflows by design; the SDK warns about that at every start.
    const expected = message === 'No workflows registered, not polling for workflow tasks';
    logger[expected ? 'info' : pinoLevel[level]](
      error === undefined ? rest : { ...rest, err: error },
      message,
    );
  };
}

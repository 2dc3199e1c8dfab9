import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type LogEntry,
  type LogLevel,
} from '@temporalio/worker';
import type { Logger } from 'pino';
import type { Activities } from '../activities/index.js';
import { bundleWorkflows } from './workflow-bundle.js';

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: Activities;
  /** A prebuilt bundle (tests build one per run); without it the workflows are bundled now. */
  workflowBundlePath?: string;
  maxCachedWorkflows?: number;
}

export async function createWorker(options: WorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: options.activities,
    ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
    workflowBundle: options.workflowBundlePath
      ? { codePath: options.workflowBundlePath }
      : { code: await bundleWorkflows() },
  });
}

const pinoLevel: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** Sends the SDK's own logs (worker state, workflow and activity logs) through our JSON logger. Call once, first. */
export function installTemporalRuntime(logger: Logger): void {
  Runtime.install({ logger: new DefaultLogger('INFO', temporalLogSink(logger)) });
}

/**
 * One SDK log entry as one JSON line. The SDK puts a failure under `error`; pino serializes
 * errors (message, type, stack) only under `err`, and would print `{}`.
 */
export function temporalLogSink(logger: Logger): (entry: LogEntry) => void {
  return ({ level, message, meta }) => {
    const { error, ...rest } = meta ?? {};
    logger[pinoLevel[level]](error === undefined ? rest : { ...rest, err: error }, message);
  };
}

export { NativeConnection };

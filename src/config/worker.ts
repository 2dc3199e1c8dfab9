import { z } from 'zod';
import { int, settingGroup } from './setting.js';

/** The Temporal worker: how much it runs at once, its health port, its shutdown. */
export const workerSettings = settingGroup({
  title: 'Worker',
  shape: {
    WORKER_MAX_CACHED_WORKFLOWS: int(100, 2),
    WORKER_MAX_CONCURRENT_ACTIVITIES: int(100, 1),
    WORKER_MAX_PROVIDER_WAITS: int(1000, 1),
    WORKER_HEALTH_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
    WORKER_HEALTH_HOST: z.string().default('127.0.0.1'),
    WORKER_SHUTDOWN_GRACE_MS: int(30_000, 0),
    WORKFLOW_BUNDLE_PATH: z.string().optional(),
  },
  docs: {
    // Generations spend weeks parked on timers: a small cache keeps a worker's memory flat.
    WORKER_MAX_CACHED_WORKFLOWS: {
      readBy: ['worker'],
      text: 'Workflows kept in memory between their tasks; the others are rebuilt from history when they wake.',
    },
    WORKER_MAX_CONCURRENT_ACTIVITIES: {
      readBy: ['worker'],
      text: 'Short steps (submit, persist, refund, expire) a worker runs at once.',
    },
    WORKER_MAX_PROVIDER_WAITS: {
      readBy: ['worker'],
      text: 'Provider waits a worker runs at once (their own task queue, so slow jobs never starve the steps).',
    },
    WORKER_HEALTH_PORT: {
      readBy: ['worker'],
      text: 'The worker’s `GET /healthz` and `/readyz` port. Unset: none, so that several workers can share a host.',
    },
    WORKER_HEALTH_HOST: { readBy: ['worker'], text: 'Where the worker’s health port listens.' },
    WORKER_SHUTDOWN_GRACE_MS: {
      readBy: ['worker'],
      text: 'After SIGTERM the worker stops polling; activities in flight get this long to finish before they are cancelled.',
    },
    WORKFLOW_BUNDLE_PATH: {
      readBy: ['worker'],
      text: 'A prebuilt workflow bundle (`bundleWorkflowCode`): the worker starts faster. Unset: it bundles `src/workflows` at start.',
    },
  },
});

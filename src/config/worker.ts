import { z } from 'zod';
import { int, settingGroup } from './setting.js';

/** The Temporal worker: how much it runs at once, its health port, its shutdown. */
export const workerSettings = settingGroup({
  title: 'Worker',
  shape: {
    WORKER_MAX_CACHED_WORKFLOWS: int(100, 2),
    WORKER_MAX_CONCURRENT_ACTIVITIES: int(100, 1),
    WORKER_MAX_PROVIDER_WAITS: int(1000, 1),
    WORKER_MAX_BATCH_SLICES: int(100, 1),
    WORKER_HEALTH_PORT: z.coerce.number().int().min(1).max(65_535).optional(),
    WORKER_HEALTH_HOST: z.string().default('127.0.0.1'),
    WORKER_SHUTDOWN_GRACE_MS: int(30_000, 0),
    WORKFLOW_BUNDLE_PATH: z.string().optional(),
    WORKER_DEPLOYMENT_NAME: z.string().trim().min(1).default('generation-service'),
    WORKER_SET_CURRENT_VERSION: z.enum(['when-none', 'always', 'never']).default('when-none'),
    WORKER_TASK_QUEUES: z.enum(['all', 'generations', 'thumbnails']).default('all'),
    THUMBNAIL_SWEEP_INTERVAL_MS: int(30_000, 0),
    THUMBNAIL_SWEEP_BATCH_SIZE: int(50, 1),
    WEBHOOK_DELIVERIES_PER_ACCOUNT: int(20, 1),
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
      text: 'Reads of provider jobs a worker runs at once, on their own task queue (`<queue>.provider-waits`): each a short status read, or an OpenAI call, which lasts as long as its image. A generation waiting for its provider holds none (it waits in its workflow).',
    },
    WORKER_MAX_BATCH_SLICES: {
      readBy: ['worker'],
      text: "Batch activities a worker runs at once, on the batches' own task queue (`<TEMPORAL_TASK_QUEUE>.batches`): each open batch's slice holds one for up to `BATCH_SLICE_MS`, so past this many open batches per worker they take turns, fairly between accounts; generation steps never wait for these slots, nor batches for theirs.",
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
    WORKER_DEPLOYMENT_NAME: {
      readBy: ['worker'],
      text: 'The Temporal Worker Deployment the worker runs in; its version’s build id is a digest of the workflow bundle, so every build of the same workflow code shares one.',
    },
    WORKER_SET_CURRENT_VERSION: {
      readBy: ['worker'],
      text: 'At start: `when-none` makes the worker’s version the deployment’s Current Version only when it has none (a first deploy, `npm test`); `always` makes it current (`npm start` sets this, so an edited workflow takes new generations); `never` leaves rollout to operators (see operating.md).',
    },
    WORKER_TASK_QUEUES: {
      readBy: ['worker'],
      text: 'What the worker polls: `all`; `generations` (workflows, their steps and provider waits: the gallery’s thumbnails are left to other workers); or `thumbnails` only (the gallery’s thumbnails, made after a generation succeeded: CPU for libvips, off the generation’s critical path). Some worker must poll the thumbnails; without one the gallery shows the images themselves.',
    },
    THUMBNAIL_SWEEP_INTERVAL_MS: {
      readBy: ['worker'],
      text: 'How often the thumbnails schedule (`generation-thumbnails.<task queue>`) makes the gallery’s pending thumbnails; until then the gallery shows the image itself (0: no schedule, no thumbnails made).',
    },
    THUMBNAIL_SWEEP_BATCH_SIZE: {
      readBy: ['worker'],
      text: 'Gallery images one batch of a thumbnails sweep reads; a sweep runs at most 20 batches and leaves the rest to the next.',
    },
    WEBHOOK_DELIVERIES_PER_ACCOUNT: {
      readBy: ['worker'],
      text: 'Webhook delivery attempts of one account in flight at once, across all workers (each holds a worker’s delivery slot for up to 15 s): the account’s others wait their turn, oldest first, holding no slot; none is dropped. So one account’s unanswering receiver never takes the slots every account’s deliveries share (see operating.md).',
    },
  },
});

/**
 * Every story a generation's workflow tells, each with the recorded histories that replay it
 * (test/fixtures/histories/<name>.json, one per run: the active life, then the runs it continued
 * as). `npm run record:histories` records them all; test/workflows/stories.test.ts fails when a
 * story has no history, so a story added here (or to the workflow) needs its recording.
 */
export const generationStories: Record<string, readonly string[]> = {
  success: ['success', 'success-retention-expired'],
  'a later request meets the Idempotency-Key record of an ended generation': ['key-held'],
  'rejected at admission (insufficient credits)': ['rejected-insufficient-credits'],
  'rejected by the provider': ['provider-rejected'],
  'provider failure, refunded': ['provider-failed-refunded'],
  'a refund retried until it commits': ['refund-retried'],
  'review, refunded by support': ['review-refunded'],
  'review, resolved with the provider job': ['review-resolved', 'review-resolved-retention'],
  'review handed off to the review run, then resolved': [
    'review-handed-off',
    'review-run-resolved',
    'review-resumed',
    'review-resumed-retention',
  ],
  'cancel while the job waits in the provider queue': ['cancel-queued-stopped'],
  'cancel while the provider runs the job': ['cancel-running-not-cancelable', 'cancel-running-retention'],
  'cancel of a job the provider started as we canceled: canceled, charged': ['cancel-running-charged'],
  'cancel answered unknown, the job then ended without output: canceled, refunded': [
    'cancel-unknown-refunded',
  ],
  'cancel answered unknown, the job then delivered: not cancelable, succeeded': [
    'cancel-unknown-succeeded',
    'cancel-unknown-succeeded-retention',
  ],
  'cancellation request (Temporal UI) while the job waits in the queue': ['cancel-request-queued-stopped'],
  'customer image URLs staged before the submit': ['customer-images-staged', 'customer-images-retention'],
  'content expiry that fails: the run holds the key until its horizon': [
    'expiry-failed',
    'expiry-failed-held',
  ],
  "support reset of a generation (the job's end, pushed later, reaches the run the reset started)": [
    'support-reset',
    'support-reset-retention',
  ],
  "the provider pushes the job's end: read once, persisted": ['push-first', 'push-first-retention'],
  "the push is lost: the fallback read finds the job's end": ['push-lost', 'push-lost-retention'],
  'the push comes twice: the job read once, persisted once': ['push-twice', 'push-twice-retention'],
  'the push comes as the fallback read is due: the job read once or twice, persisted once': [
    'push-racing-read',
    'push-racing-read-retention',
  ],
  'a long wait continues as new; its end, pushed then, reaches the new run': [
    'wait-continued',
    'wait-continued-resumed',
    'wait-continued-retention',
  ],
  'a webhook subscription: its delivery workflow started': ['webhook-started', 'webhook-retention'],
  'rejected at admission, with a webhook subscription: its delivery workflow started': ['webhook-rejected'],
  'webhook delivery: the first attempt refused (500), the retry delivers': ['webhook-delivery-retried'],
  'fal refuses the create: the next route (Replicate) serves it': [
    'route-failover',
    'route-failover-retention',
  ],
  'Replicate reports its job aborted before it started: the next route (fal) serves it': [
    'route-never-started',
    'route-never-started-retention',
  ],
  'the provider wait reaches its horizon: refunded, timed out, the job canceled': ['provider-wait-horizon'],
  'persisting reaches its horizon: refunded, timed out': ['persist-horizon'],
  'the provider unreachable: submitted in the background until the submit horizon, refunded': [
    'submit-horizon',
  ],
  'its Cancel-After deadline passes before a provider has it: canceled, refunded': ['cancel-after-passed'],
  'admission breaks (a bug): refused, the run ends failed': ['admission-broke'],
  'webhook delivery: a look for events that fails is made again': ['webhook-look-retried'],
  'webhook delivery: the receiver answers 410 Gone: deliveries stop': ['webhook-gone'],
  'webhook delivery: a retry answered 410 Gone: deliveries stop': ['webhook-gone-on-retry'],
  'webhook delivery: a redelivery while it runs, and one after it ended (a run of its own)': [
    'webhook-redelivered-running',
    'webhook-redelivered-after-end',
  ],
  "webhook delivery: not its account's turn: it waits, holding no activity, until one is given back": [
    'webhook-turn-waited',
  ],
  'webhook delivery: a generation in review, resumed by support: its later events delivered': [
    'webhook-review-resumed',
  ],
  'a batch: its lines admitted in turn through admission, the batch completed': ['batch-completed'],
  "a batch with a webhook: it starts the delivery workflow, which delivers the batch's events": [
    'batch-webhook',
    'batch-webhook-deliveries',
  ],
};

/**
 * Histories recorded by an earlier build of a workflow that moves to new builds (Auto-Upgrade),
 * kept beside the stories' (and not recorded again) while a run of that build can still be open:
 * replay.test.ts replays them against the current code, as the current build does when it takes
 * such a run over. Each names the date it can go.
 */
export const keptHistories: Record<string, readonly string[]> = {
  // Recorded when batches were Pinned (before issue 45 §4); an open batch of that build is moved
  // to the current one (admin cancel-batch, or Temporal's versioning override). Can go 7 days (a
  // batch's longest completion window) after the change is deployed.
  'a batch run by the build before batches were Auto-Upgrade: the current build replays it': [
    'batch-completed-pinned',
    'batch-webhook-pinned',
  ],
};

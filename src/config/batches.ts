import { int, settingGroup } from './setting.js';

/** Batches (POST /v1/batches): what a batch may hold, and how its lines are started. */
export const batchSettings = settingGroup({
  title: 'Batches',
  shape: {
    BATCH_MAX_LINES: int(50_000, 1),
    BATCH_BODY_LIMIT_BYTES: int(512 * 1024 * 1024, 1024),
    BATCH_UPLOADS_PER_KEY: int(4, 1),
    BATCH_LINES_IN_FLIGHT: int(20, 1),
    BATCH_POLL_INTERVAL_MS: int(1_000, 10),
    BATCH_SLICE_MS: int(30_000, 100),
    BATCH_HISTORY_EVENTS_PER_RUN: int(2_000, 20),
    BATCH_LINES_IN_FLIGHT_PER_ACCOUNT: int(100, 1),
    BATCH_OPEN_PER_ACCOUNT: int(100, 1),
    BATCH_QUEUED_LINES_PER_ACCOUNT: int(200_000, 1),
  },
  docs: {
    BATCH_MAX_LINES: { readBy: ['api'], text: 'Most request lines one batch may hold.' },
    BATCH_BODY_LIMIT_BYTES: {
      readBy: ['api'],
      text: 'Largest body `POST /v1/batches` (and its quote) takes, JSON or JSONL (`application/x-ndjson`), in place of `BODY_LIMIT_BYTES`; either is read line by line as it arrives, never held whole. One line is at most `BODY_LIMIT_BYTES` (a `413` naming it, the rest unread).',
    },
    BATCH_UPLOADS_PER_KEY: {
      readBy: ['api'],
      text: 'Batch uploads (`POST /v1/batches` and its quote) one API process reads at once for one API key; one more is answered `429 rate_limited` with `Retry-After` before its body is read. An upload holds no database connection while it arrives: its lines are checked and staged (in memory, past 4 MiB in a file under `TMPDIR`), then written in one short transaction.',
    },
    BATCH_LINES_IN_FLIGHT: {
      readBy: ['api'],
      text: "Lines of one batch queued at once (admitted, not yet ended): the batch starts its next line when one ends. While its lines hold places of a capped provider, fewer: those places and 2 more. Batch lines do not count against `CONCURRENT_GENERATIONS_PER_ACCOUNT`; all of an account's batches together keep to `BATCH_LINES_IN_FLIGHT_PER_ACCOUNT`. Read when the batch's workflow starts.",
    },
    BATCH_POLL_INTERVAL_MS: {
      readBy: ['worker'],
      text: "How often a batch's workflow looks in PostgreSQL for lines that ended, a cancel or its deadline. A line's end wakes it sooner (the worker hears of each generation's change), so this is the fallback for a missed notification, a cancel and the deadline.",
    },
    BATCH_SLICE_MS: {
      readBy: ['worker'],
      text: "Longest a batch's activity runs (admitting lines, waiting for their ends, heartbeating) before it reports to its workflow.",
    },
    BATCH_HISTORY_EVENTS_PER_RUN: {
      readBy: ['api'],
      text: "History events after which a batch's workflow continues as new (sooner if Temporal suggests it): each slice adds a handful, so its history stays small whatever the batch's size. Read when the batch's workflow starts.",
    },
    BATCH_LINES_IN_FLIGHT_PER_ACCOUNT: {
      readBy: ['worker'],
      text: "Lines of one account's batches queued at once, all its batches together (each batch also keeps to `BATCH_LINES_IN_FLIGHT`): however many batches an account opens, its lines in flight stay this many; a batch whose turn it is starts its next line when one of the account's ends.",
    },
    BATCH_OPEN_PER_ACCOUNT: {
      readBy: ['api'],
      text: 'Batches one account may have open (not ended: validating, in_progress or canceling); one more is refused with `409 open_batch_limit_exceeded`, nothing written.',
    },
    BATCH_QUEUED_LINES_PER_ACCOUNT: {
      readBy: ['api'],
      text: "Lines one account's open batches may hold together (each batch's lines count until it ends); a batch that would take it past this is refused with `409 batch_lines_limit_exceeded`, nothing written.",
    },
  },
});

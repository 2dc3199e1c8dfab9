-- Provider places shared fairly (issue 38 §2). A place is held in a lane: `interactive` (a
-- generation someone is waiting for) or `batch` (a batch's line), with the account and batch it
-- counts for. A generation refused a place says it is waiting (provider_place_waiters, refreshed on
-- every try), so that the next free place goes to the first in the fair order: interactive ones
-- first, then batch lines round-robin between accounts and, within an account, between its batches.
ALTER TABLE provider_slots
  ADD COLUMN lane       text NOT NULL DEFAULT 'interactive' CHECK (lane IN ('interactive', 'batch')),
  ADD COLUMN account_id text,
  ADD COLUMN batch_id   text;

CREATE TABLE provider_place_waiters (
  generation_id text PRIMARY KEY REFERENCES generations (id),
  provider      text NOT NULL,
  lane          text NOT NULL CHECK (lane IN ('interactive', 'batch')),
  account_id    text NOT NULL,
  batch_id      text,
  waiting_since timestamptz NOT NULL DEFAULT now(),
  -- The waiter's last try: one that stopped trying (moved on, ended, its worker gone) is passed over.
  tried_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_place_waiters_by_provider ON provider_place_waiters (provider, tried_at);

-- Batches side by side (issue 45): one account's batches cannot crowd out the others, a line
-- waiting on a down provider holds no other line back, and an ended batch keeps only what its
-- results need.

-- A line's request is needed until it is admitted or ended: a batch that ended drops its lines'
-- requests (what the results file shows is the line's custom_id, state and error, and its
-- generation). A line not started keeps its request.
ALTER TABLE batch_lines
  ALTER COLUMN request DROP NOT NULL,
  ADD CONSTRAINT batch_lines_request CHECK (request IS NOT NULL OR state <> 'pending'),
  -- When a line whose admission could not be decided (`later`: its provider down, Temporal slow)
  -- is tried again; until then its batch's slice passes over it to the lines behind it.
  ADD COLUMN retry_at timestamptz,
  -- Until when a slice is admitting the line: counted, with the account's batch generations still
  -- queued, against BATCH_LINES_IN_FLIGHT_PER_ACCOUNT (a slice that died holds it that long at most).
  ADD COLUMN admitting_until timestamptz;

-- The lines a slice may take next: those never tried in input order, then those put off, by when
-- they are due. Still the pending lines of a batch for every other look (counts, ends).
DROP INDEX batch_lines_pending;
CREATE INDEX batch_lines_pending ON batch_lines (batch_id, (coalesce(retry_at, '-infinity'::timestamptz)), line)
  WHERE state = 'pending';
CREATE INDEX batch_lines_admitting ON batch_lines (batch_id)
  WHERE state = 'pending' AND admitting_until IS NOT NULL;

-- An account's open batches (not ended): the caps at creation (BATCH_OPEN_PER_ACCOUNT,
-- BATCH_QUEUED_LINES_PER_ACCOUNT) and the lines its slices are admitting.
CREATE INDEX batches_account_open ON batches (account_id)
  WHERE status IN ('validating', 'in_progress', 'canceling');

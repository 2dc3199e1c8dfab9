-- What the generation workflow's activities need to be idempotent on the
-- generation (not on the workflow run: a support reset changes the run).
ALTER TABLE generations
  ADD COLUMN fingerprint         text,
  ADD COLUMN idempotency_key     text,
  -- The token the provider sees; stable across retries, crashes and resets.
  ADD COLUMN provider_token      text,
  -- Set before the first submit is sent: a later attempt that finds it set asks the
  -- provider (lookup) instead of submitting again.
  ADD COLUMN submit_attempted_at timestamptz,
  ADD COLUMN provider_job_id     text,
  -- Unguessable storage folders of the outputs and of inline input images.
  ADD COLUMN output_prefix       text,
  ADD COLUMN input_prefix        text;

-- The concurrency limit counts an account's generations in progress.
CREATE INDEX generations_account_queued ON generations (account_id) WHERE status = 'queued';
CREATE INDEX generations_account_model_created ON generations (account_id, model, created_at DESC, id DESC);

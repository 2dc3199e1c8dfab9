-- Reconciliation: a scheduled sweep (the reconciliationWorkflow) finds generations left
-- queued without a running workflow of their own (terminated from the Temporal UI, say, or
-- failed past a step's horizon) and finishes them through the normal refund path, or flags
-- them for review where the provider may have run the job. What it did is kept here for
-- operators (`npm run admin -- reconciliations`).
CREATE TABLE generation_reconciliations (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  generation_id text NOT NULL REFERENCES generations (id),
  action        text NOT NULL CHECK (action IN ('refunded', 'flagged_for_review', 'running_past_horizon')),
  reason        text NOT NULL,
  workflow_id   text,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX generation_reconciliations_created ON generation_reconciliations (created_at DESC, id DESC);
-- A generation is reported as running past its horizon once, not at every sweep.
CREATE UNIQUE INDEX generation_reconciliations_once ON generation_reconciliations (generation_id, action);

-- When the sweep last looked at a queued generation: each is looked at again only after the
-- grace period, so long provider waits do not crowd out the rest.
ALTER TABLE generations ADD COLUMN reconcile_checked_at timestamptz;
CREATE INDEX generations_queued_since ON generations (updated_at) WHERE status = 'queued';

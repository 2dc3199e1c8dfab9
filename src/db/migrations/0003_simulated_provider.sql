-- The simulated provider's own state. It stands in for an external service,
-- so its jobs must outlive our worker: a worker restarted mid-generation finds
-- the job where a real provider would have kept it. `submissions` counts every
-- submit call the provider received, which tests use to prove we never submit
-- a generation twice.
CREATE TABLE sim_provider_jobs (
  token              text PRIMARY KEY,
  job_id             text NOT NULL UNIQUE,
  model              text NOT NULL,
  media_type         text NOT NULL,
  prompt             text NOT NULL,
  options            jsonb NOT NULL,
  images             jsonb NOT NULL,
  long_edge_px       integer NOT NULL,
  directives         jsonb NOT NULL,
  submissions        integer NOT NULL DEFAULT 1,
  fetch_failures_left integer NOT NULL DEFAULT 0,
  submitted_at       timestamptz NOT NULL DEFAULT now(),
  ready_at           timestamptz NOT NULL
);

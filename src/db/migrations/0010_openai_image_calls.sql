-- The OpenAI Images adapter's own state. OpenAI's image endpoints are synchronous: the HTTP call
-- is the job, has no id, can take minutes and is billed once it reached them even if its answer
-- is lost. So submitting only records the call here (from inside the POST, no network); the long
-- provider wait makes it, once: a row leaves `pending` by an atomic claim before anything is
-- sent, and a row found `sent` or `lost` is never sent again (its fate is unknown: review).
--
--   pending  → sent       claimed; the call is in flight (or its worker died mid-call)
--   sent     → pending    nothing reached OpenAI (connection refused, 429, our key refused)
--   sent     → succeeded  the images are staged in openai_image_results
--   sent     → failed     OpenAI refused the input (400): nothing ran
--   sent     → lost       the call left us and its answer did not come back whole
--   pending  → canceled   given up before it was sent
CREATE TABLE openai_image_calls (
  job_id       text PRIMARY KEY,
  -- Our idempotency token: a second submit of the same generation finds this row.
  token        text NOT NULL UNIQUE,
  endpoint     text NOT NULL CHECK (endpoint IN ('generations', 'edits')),
  -- What is sent: { model, input } (reference images as URLs, read when the call is made).
  -- Dropped once the call is over; never holds the API key.
  request      jsonb,
  state        text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'sent', 'succeeded', 'failed', 'lost', 'canceled')),
  -- Calls sent for this row: more than one only after answers that prove nothing reached OpenAI.
  sends        integer NOT NULL DEFAULT 0,
  submissions  integer NOT NULL DEFAULT 1,
  created_at   timestamptz NOT NULL DEFAULT now(),
  sent_at      timestamptz,
  finished_at  timestamptz,
  -- What went wrong, in a form safe to keep and show.
  error        text,
  -- The staged images' sizes and types ([{ width, height, contentType }]), once succeeded.
  results      jsonb
);
CREATE INDEX openai_image_calls_created ON openai_image_calls (created_at);

-- The images of a succeeded call, until persisting has copied them into our storage. They are
-- deleted after a retention (past the persist step's horizon), with their call rows later.
CREATE TABLE openai_image_results (
  job_id       text NOT NULL REFERENCES openai_image_calls (job_id) ON DELETE CASCADE,
  index        integer NOT NULL,
  content_type text NOT NULL,
  bytes        bytea NOT NULL,
  staged_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, index)
);
CREATE INDEX openai_image_results_staged ON openai_image_results (staged_at);

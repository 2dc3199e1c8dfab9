-- Webhook deliveries (issue 30 §3). A generation's subscription (POST /v1/generations `webhook`),
-- written once its request is admitted, and every delivery attempt made to it: the event, the URL,
-- the receiver's status, how long it took and what went wrong. `gone_at`: the receiver answered
-- 410 Gone, and nothing more is sent to that URL for this generation.
CREATE TABLE generation_webhooks (
  generation_id text PRIMARY KEY REFERENCES generations (id) ON DELETE CASCADE,
  url           text NOT NULL,
  events        text[] NOT NULL CHECK (cardinality(events) > 0),
  created_at    timestamptz NOT NULL DEFAULT now(),
  gone_at       timestamptz
);

CREATE TABLE webhook_delivery_attempts (
  id            bigserial PRIMARY KEY,
  generation_id text NOT NULL REFERENCES generations (id) ON DELETE CASCADE,
  event_seq     integer NOT NULL,
  event_type    text NOT NULL,
  -- The Standard Webhooks message id: the same on every attempt of one delivery.
  webhook_id    text NOT NULL,
  attempt       integer NOT NULL CHECK (attempt > 0),
  url           text NOT NULL,
  -- The receiver's HTTP status; null when none came (refused address, timeout, connection error).
  status        integer,
  latency_ms    integer NOT NULL,
  outcome       text NOT NULL CHECK (outcome IN ('delivered', 'failed', 'gone')),
  error         text,
  attempted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_delivery_attempts_generation ON webhook_delivery_attempts (generation_id, event_seq, id);

-- Batches (issue 38): thousands of generations from one request. A batch is a row of its own and
-- its lines live here, never in the batch workflow's history: the workflow reads the next lines,
-- admits each as an ordinary generation (its own id, events, refund rules) and waits on their ends.
--
-- A line's generation names its batch and `custom_id` (two columns of `generations`, shown in the
-- API's Generation and in its events). They are written by admission with the row itself
-- (admit_generation() below, and the refusal's insert), so no event of the generation ever lacks them.
CREATE TABLE batches (
  id                  text PRIMARY KEY CHECK (id ~ '^batch_[A-Za-z0-9]+$'),
  account_id          text NOT NULL REFERENCES accounts (id),
  api_key_id          text NOT NULL REFERENCES api_keys (id),
  workflow_id         text NOT NULL,
  idempotency_key     text,
  -- SHA-256 over the canonical JSON of every line, then of the envelope: the same lines sent as
  -- JSON or as JSONL are the same request.
  fingerprint         text NOT NULL,
  status              text NOT NULL DEFAULT 'validating'
    CHECK (status IN ('validating', 'in_progress', 'completed', 'canceling', 'canceled', 'expired')),
  completion_window   text NOT NULL,
  line_count          integer NOT NULL CHECK (line_count > 0),
  -- What the lines were quoted at creation (each is charged only when admitted, at its price then).
  quoted_credits      bigint NOT NULL CHECK (quoted_credits >= 0),
  webhook             jsonb,
  metadata            jsonb,
  created_at          timestamptz NOT NULL DEFAULT now(),
  expires_at          timestamptz NOT NULL,
  started_at          timestamptz,
  completed_at        timestamptz,
  cancel_requested_at timestamptz,
  UNIQUE (api_key_id, idempotency_key)
);
CREATE INDEX batches_account_created ON batches (account_id, created_at DESC, id DESC);

-- One row per request line, in input order. `state`: pending (not admitted yet), started (its
-- generation, accepted or refused at admission, is `generation_id`), refused (admission refused it
-- without a generation: `error`), canceled or expired (never admitted, never charged).
CREATE TABLE batch_lines (
  batch_id      text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line          integer NOT NULL CHECK (line >= 0),
  custom_id     text NOT NULL,
  request       jsonb NOT NULL,
  state         text NOT NULL DEFAULT 'pending'
    CHECK (state IN ('pending', 'started', 'refused', 'canceled', 'expired')),
  generation_id text,
  error         jsonb,
  ended_at      timestamptz,
  PRIMARY KEY (batch_id, line),
  UNIQUE (batch_id, custom_id),
  CONSTRAINT batch_lines_generation CHECK ((state = 'started') = (generation_id IS NOT NULL)),
  CONSTRAINT batch_lines_error CHECK ((state = 'refused') = (error IS NOT NULL))
);
CREATE INDEX batch_lines_pending ON batch_lines (batch_id, line) WHERE state = 'pending';

ALTER TABLE generations ADD COLUMN batch_id text REFERENCES batches (id), ADD COLUMN custom_id text;
CREATE INDEX generations_batch_status ON generations (batch_id, status) WHERE batch_id IS NOT NULL;

-- A batch's own events (batch.created, batch.progress, batch.completed/canceled/expired), in the
-- account's event log beside its generations' (migration 0023 left room for them).
CREATE TABLE batch_events (
  batch_id   text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  seq        integer NOT NULL CHECK (seq > 0),
  type       text NOT NULL CHECK (type ~ '^batch\.[a-z_]+$'),
  created_at timestamptz NOT NULL DEFAULT now(),
  resource   jsonb NOT NULL,
  PRIMARY KEY (batch_id, seq)
);

ALTER TABLE account_events
  ADD COLUMN batch_id text,
  ADD COLUMN batch_seq integer,
  DROP CONSTRAINT account_events_one_subject,
  ADD CONSTRAINT account_events_one_subject CHECK (num_nonnulls(generation_id, batch_id) = 1
    AND (generation_id IS NULL) = (generation_seq IS NULL) AND (batch_id IS NULL) = (batch_seq IS NULL)),
  ADD CONSTRAINT account_events_batch_event_key UNIQUE (batch_id, batch_seq),
  ADD CONSTRAINT account_events_batch_event_fkey FOREIGN KEY (batch_id, batch_seq)
    REFERENCES batch_events (batch_id, seq) ON DELETE CASCADE;

-- As append_account_event() (0023) for a generation's event: the position under the account's head lock.
CREATE FUNCTION append_batch_account_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  account       text := NEW.resource->>'account_id';
  next_position bigint;
BEGIN
  INSERT INTO account_event_heads AS h (account_id, last_position) VALUES (account, 1)
  ON CONFLICT (account_id) DO UPDATE SET last_position = h.last_position + 1
  RETURNING h.last_position INTO next_position;
  INSERT INTO account_events (account_id, position, batch_id, batch_seq)
  VALUES (account, next_position, NEW.batch_id, NEW.seq);
  PERFORM pg_notify('account_event', account);
  RETURN NULL;
END $$;

CREATE TRIGGER batch_events_append_account_event AFTER INSERT ON batch_events
  FOR EACH ROW EXECUTE FUNCTION append_batch_account_event();

-- admit_generation() (0012) whole, with two changes: a batch's line is not held to the account's
-- concurrency limit, nor counted in it; and the row carries its batch_id and custom_id.
CREATE OR REPLACE FUNCTION admit_generation(
  p_generation        jsonb,
  p_price             integer,
  p_definition_digest text,
  p_concurrency_limit integer,
  p_key               jsonb
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  generation           generations%ROWTYPE := jsonb_populate_record(NULL::generations, p_generation);
  existing             record;
  holder               record;
  in_progress          integer;
  model                record;
  subscription_balance bigint;
  one_time_balance     bigint;
  from_subscription    bigint;
  claims_key           boolean := p_key IS NOT NULL AND generation.idempotency_key IS NOT NULL;
BEGIN
  IF p_concurrency_limit IS NULL THEN
    RAISE EXCEPTION 'admit_generation: no concurrency limit given';
  END IF;
  PERFORM FROM accounts WHERE id = generation.account_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'admit_generation: no account %', generation.account_id;
  END IF;

  SELECT g.status, g.credits, g.error INTO existing FROM generations g WHERE g.id = generation.id;
  IF FOUND THEN
    RETURN jsonb_build_object('outcome', 'existing', 'status', existing.status, 'credits', existing.credits,
                              'error', existing.error);
  END IF;

  IF claims_key THEN
    SELECT k.generation_id, k.fingerprint, k.held_until, g.status, g.credits, g.error INTO holder
    FROM idempotency_keys k JOIN generations g ON g.id = k.generation_id
    WHERE k.api_key_id = generation.api_key_id AND k.idempotency_key = generation.idempotency_key
      AND k.held_until > (p_key->>'at')::timestamptz;
    IF FOUND THEN
      RETURN jsonb_build_object('outcome', 'key_held', 'generation_id', holder.generation_id,
                                'fingerprint', holder.fingerprint, 'held_until', holder.held_until,
                                'status', holder.status, 'credits', holder.credits, 'error', holder.error);
    END IF;
  END IF;

  -- A batch's lines are held to the batch's own bound (BATCH_LINES_IN_FLIGHT), and never count
  -- against the account's interactive limit: a batch running never makes a POST answer 429.
  IF generation.batch_id IS NULL THEN
    SELECT count(*) INTO in_progress FROM generations g
    WHERE g.account_id = generation.account_id AND g.status = 'queued' AND g.batch_id IS NULL;
    IF in_progress >= p_concurrency_limit THEN
      RETURN jsonb_build_object('outcome', 'concurrency_limit');
    END IF;
  END IF;

  SELECT m.definition, md5(m.definition::text) AS digest INTO model FROM models m
  WHERE m.id = generation.model AND m.active;
  IF model.digest IS DISTINCT FROM p_definition_digest THEN
    RETURN jsonb_build_object('outcome', 'requote', 'definition', model.definition, 'digest', model.digest);
  END IF;
  IF model.digest IS NULL OR p_price IS NULL THEN
    RETURN jsonb_build_object('outcome', 'unavailable');
  END IF;

  SELECT coalesce(sum(b.subscription_credits), 0), coalesce(sum(b.one_time_credits), 0)
  INTO subscription_balance, one_time_balance FROM credit_balances b WHERE b.account_id = generation.account_id;
  IF subscription_balance + one_time_balance < p_price THEN
    RETURN jsonb_build_object('outcome', 'insufficient_credits', 'available', subscription_balance + one_time_balance);
  END IF;

  from_subscription := least(subscription_balance, p_price);
  UPDATE credit_balances SET subscription_credits = subscription_credits - from_subscription,
    one_time_credits = one_time_credits - (p_price - from_subscription), updated_at = now()
  WHERE account_id = generation.account_id;
  INSERT INTO credit_ledger (account_id, kind, generation_id, subscription_delta, one_time_delta, reason)
  VALUES (generation.account_id, 'debit', generation.id, -from_subscription, -(p_price - from_subscription),
          'generation ' || generation.model);
  INSERT INTO generations (id, account_id, api_key_id, workflow_id, status, model, media_type, credits, input,
                           fingerprint, idempotency_key, provider_token, input_prefix, created_at, batch_id, custom_id)
  VALUES (generation.id, generation.account_id, generation.api_key_id, generation.workflow_id, 'queued',
          generation.model, generation.media_type, p_price, generation.input, generation.fingerprint,
          generation.idempotency_key, generation.provider_token, generation.input_prefix, generation.created_at,
          generation.batch_id, generation.custom_id);
  IF claims_key THEN
    -- Any record left is past its horizon (checked above, under the lock): the key is new.
    INSERT INTO idempotency_keys (api_key_id, idempotency_key, generation_id, fingerprint, held_until)
    VALUES (generation.api_key_id, generation.idempotency_key, generation.id, generation.fingerprint,
            (p_key->>'held_until')::timestamptz)
    ON CONFLICT (api_key_id, idempotency_key) DO UPDATE
      SET generation_id = EXCLUDED.generation_id, fingerprint = EXCLUDED.fingerprint,
          held_until = EXCLUDED.held_until, created_at = now();
  END IF;
  RETURN jsonb_build_object('outcome', 'accepted', 'credits', p_price);
END $$;

-- record_generation_event() (0019) whole: the resource carries batch_id and custom_id.
CREATE OR REPLACE FUNCTION record_generation_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  event_type text;
  next_seq   integer;
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- A request refused at once never became a job: its only event says so.
    event_type := CASE NEW.status WHEN 'queued' THEN 'generation.created' ELSE 'generation.' || NEW.status END;
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    -- Back to queued: support resumed a generation that was in review.
    event_type := CASE NEW.status WHEN 'queued' THEN 'generation.requeued' ELSE 'generation.' || NEW.status END;
  ELSIF NEW.content_expired AND NOT OLD.content_expired THEN
    event_type := 'generation.content_expired';
  ELSIF NEW.credits_refunded AND NOT OLD.credits_refunded THEN
    event_type := 'generation.refunded';
  ELSIF (OLD.account_id, OLD.model, OLD.media_type, OLD.credits, OLD.input, OLD.output, OLD.error,
         OLD.created_at, OLD.completed_at, OLD.expires_at)
        IS DISTINCT FROM
        (NEW.account_id, NEW.model, NEW.media_type, NEW.credits, NEW.input, NEW.output, NEW.error,
         NEW.created_at, NEW.completed_at, NEW.expires_at) THEN
    event_type := 'generation.updated';
  ELSIF OLD.provider_job_id IS NULL AND NEW.provider_job_id IS NOT NULL AND NEW.status = 'queued' THEN
    -- Not a field of the resource, but what a waiting customer wants to know: the provider has the job.
    event_type := 'generation.processing';
  ELSE
    RETURN NULL;
  END IF;
  IF NEW.content_expired AND TG_OP = 'UPDATE' AND NOT OLD.content_expired THEN
    -- Expiry removes the content from the log too: past events no longer carry input or output.
    UPDATE generation_events SET resource = resource || '{"input": null, "output": null}'::jsonb
    WHERE generation_id = NEW.id;
  END IF;
  -- Concurrent changes of one generation are serialized by its row lock, and this statement sees
  -- the events the previous holder committed; the primary key is the guard all the same.
  SELECT coalesce(max(seq), 0) + 1 INTO next_seq FROM generation_events WHERE generation_id = NEW.id;
  INSERT INTO generation_events (generation_id, seq, type, resource)
  VALUES (NEW.id, next_seq, event_type, jsonb_build_object(
    'id', NEW.id, 'account_id', NEW.account_id, 'status', NEW.status, 'model', NEW.model,
    'media_type', NEW.media_type, 'credits', NEW.credits, 'credits_refunded', NEW.credits_refunded,
    'input', NEW.input, 'output', NEW.output, 'error', NEW.error, 'needs_review', NEW.needs_review,
    'content_expired', NEW.content_expired, 'created_at', NEW.created_at, 'completed_at', NEW.completed_at,
    'expires_at', NEW.expires_at, 'provider', NEW.provider, 'batch_id', NEW.batch_id,
    'custom_id', NEW.custom_id));
  PERFORM pg_notify('generation_event', NEW.id);
  RETURN NULL;
END $$;

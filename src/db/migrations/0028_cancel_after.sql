-- A generation's Cancel-After deadline (POST /v1/generations, the `Cancel-After` header): a
-- generation not yet handed to a provider by then is canceled and refunded (the submit checks it
-- under its claim). Shown as the Generation's `cancel_after` (null without one), so admission
-- writes it with the row itself and every event of the generation carries it.
ALTER TABLE generations ADD COLUMN cancel_after timestamptz;

-- admit_generation() (0026) whole, with one change: the row carries its cancel_after.
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
                           fingerprint, idempotency_key, provider_token, input_prefix, created_at, batch_id, custom_id,
                           cancel_after)
  VALUES (generation.id, generation.account_id, generation.api_key_id, generation.workflow_id, 'queued',
          generation.model, generation.media_type, p_price, generation.input, generation.fingerprint,
          generation.idempotency_key, generation.provider_token, generation.input_prefix, generation.created_at,
          generation.batch_id, generation.custom_id, generation.cancel_after);
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

-- record_generation_event() (0026) whole: the resource carries cancel_after.
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
    'custom_id', NEW.custom_id, 'cancel_after', NEW.cancel_after));
  PERFORM pg_notify('generation_event', NEW.id);
  RETURN NULL;
END $$;

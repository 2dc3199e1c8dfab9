-- Batch lines at the edges (issue 45): a line charged is never reported as never started, and a
-- batch stops with the access it was made under.
--
-- The database decides whether a batch's line may still be admitted (admit_generation() below) and
-- ends the lines not admitted (end_pending_batch_lines()), both under the account's lock, so that
-- a line is either admitted before its batch ended, and linked to its generation, or refused and
-- ended `canceled` or `expired`, never charged: never both. Before, a line whose admission answered
-- the batch's slice too late (ADMISSION_TIMEOUT_MS), or whose slice's worker died before it wrote
-- the line, stayed `pending` with a debited generation, and a cancel or the window's end then
-- reported it `batch_canceled`/`batch_expired`, "nothing charged".

-- A line's generations, found by its batch and custom_id (a batch line's generation carries both).
CREATE INDEX generations_batch_line ON generations (batch_id, custom_id) WHERE batch_id IS NOT NULL;

-- Ends a batch's pending lines `p_state` (canceled: the batch is canceling or canceled; expired:
-- past its expires_at, else nothing is ended), first linking each line that has a generation (its
-- admission decided, the line not yet written: linked as `started`, its results line that
-- generation with what it was charged). It takes the account's lock, which every admission of the
-- account holds while it decides: an admission that decided before the batch ended has committed
-- when the lock is granted (and is linked here), and any later one refuses the line. Returns how
-- many lines it ended.
CREATE FUNCTION end_pending_batch_lines(p_batch text, p_state text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  account text;
  ended   integer;
BEGIN
  IF p_state IS NULL OR p_state NOT IN ('canceled', 'expired') THEN
    RAISE EXCEPTION 'end_pending_batch_lines: no state %', p_state;
  END IF;
  SELECT b.account_id INTO account FROM batches b
  WHERE b.id = p_batch AND CASE p_state WHEN 'canceled' THEN b.status IN ('canceling', 'canceled')
                                        ELSE b.expires_at <= clock_timestamp() END;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  PERFORM FROM accounts WHERE id = account FOR NO KEY UPDATE;
  -- Of a line's generations, the one not rejected (at most one was admitted: its key), else the newest.
  UPDATE batch_lines l SET state = 'started', generation_id = found.id
  FROM (SELECT p.line, (SELECT g.id FROM generations g
                        WHERE g.batch_id = p.batch_id AND g.custom_id = p.custom_id
                        ORDER BY g.status = 'rejected', g.created_at DESC LIMIT 1) AS id
        FROM batch_lines p WHERE p.batch_id = p_batch AND p.state = 'pending') found
  WHERE l.batch_id = p_batch AND l.line = found.line AND l.state = 'pending' AND found.id IS NOT NULL;
  UPDATE batch_lines SET state = p_state, ended_at = date_trunc('milliseconds', now())
  WHERE batch_id = p_batch AND state = 'pending';
  GET DIAGNOSTICS ended = ROW_COUNT;
  RETURN ended;
END $$;

-- A batch stops with the access it was made under: revoking the key that created it (an API key,
-- or a connected app's), or disabling its account's API access, cancels it as
-- POST /v1/batches/{id}/cancel does, in the same transaction. Its workflow sees `canceling` at its
-- next look: the lines not started end `canceled`, never charged (admit_generation() refuses
-- them from now on), and the running ones are asked to stop. Access given back later does not
-- resume it.
CREATE FUNCTION cancel_batches_of_lost_access() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE batches SET status = 'canceling', cancel_requested_at = date_trunc('milliseconds', now())
  WHERE status IN ('validating', 'in_progress')
    AND CASE TG_TABLE_NAME WHEN 'api_keys' THEN api_key_id = NEW.id ELSE account_id = NEW.id END;
  RETURN NULL;
END $$;
CREATE TRIGGER api_keys_revoked_cancel_batches AFTER UPDATE OF revoked_at ON api_keys
  FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
  EXECUTE FUNCTION cancel_batches_of_lost_access();
CREATE TRIGGER accounts_access_disabled_cancel_batches AFTER UPDATE OF api_access_enabled ON accounts
  FOR EACH ROW WHEN (OLD.api_access_enabled AND NOT NEW.api_access_enabled)
  EXECUTE FUNCTION cancel_batches_of_lost_access();

-- admit_generation() (0034) whole, with one change: a batch's line whose batch has ended (canceling,
-- canceled, or past its window) is refused, `batch_ended` with the state the line ends in.
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
  api_key              record;
  key_window           record;
  key_spent            bigint;
  batch                record;
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

  -- A batch's line is admitted only while its batch runs (0036): not once it is canceling or
  -- canceled (a cancel, the key that made it revoked, its account's API access disabled), nor
  -- past its completion window, judged by clock_timestamp() under the account's lock, so after any
  -- end_pending_batch_lines() that held it. Nothing is written: the batch's workflow ends the line
  -- with its other pending ones, never charged. A line admitted before (its generation exists) was
  -- answered above, as `existing` or `key_held`.
  IF generation.batch_id IS NOT NULL THEN
    SELECT b.status, b.expires_at INTO batch FROM batches b WHERE b.id = generation.batch_id;
    IF batch.status NOT IN ('validating', 'in_progress') OR batch.expires_at <= clock_timestamp() THEN
      RETURN jsonb_build_object('outcome', 'batch_ended', 'state',
        CASE WHEN batch.status IN ('canceling', 'canceled') THEN 'canceled' ELSE 'expired' END);
    END IF;
  END IF;

  -- The key's own rules (0034), read with the key's row under the account's lock: every admission
  -- of the account is serialised by that lock, so a limit holds exactly across API processes.
  SELECT k.id, k.name, k.display_prefix, k.spend_limit, k.limit_reset, k.models INTO api_key
  FROM api_keys k WHERE k.id = generation.api_key_id;
  IF api_key.models IS NOT NULL AND NOT generation.model = ANY (api_key.models) THEN
    RETURN jsonb_build_object('outcome', 'model_not_allowed', 'models', to_jsonb(api_key.models));
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

  IF api_key.spend_limit IS NOT NULL THEN
    SELECT * INTO key_window FROM key_limit_window(api_key.limit_reset, now());
    key_spent := key_spend_in(api_key.id, key_window.starts);
    IF key_spent + p_price > api_key.spend_limit THEN
      PERFORM record_spend_limit_reached(generation.account_id, api_key.id, key_window.starts, jsonb_build_object(
        'id', api_key.id, 'name', api_key.name, 'prefix', api_key.display_prefix,
        'spend_limit', api_key.spend_limit, 'limit_reset', api_key.limit_reset,
        'limit_remaining', greatest(api_key.spend_limit - key_spent, 0),
        'resets_at', to_char(key_window.resets_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'model', generation.model, 'price', p_price));
      RETURN jsonb_build_object('outcome', 'key_spend_limit', 'spend_limit', api_key.spend_limit,
                                'limit_reset', api_key.limit_reset,
                                'remaining', greatest(api_key.spend_limit - key_spent, 0),
                                'resets_at', key_window.resets_at);
    END IF;
  END IF;

  from_subscription := least(subscription_balance, p_price);
  UPDATE credit_balances SET subscription_credits = subscription_credits - from_subscription,
    one_time_credits = one_time_credits - (p_price - from_subscription), updated_at = now()
  WHERE account_id = generation.account_id;
  INSERT INTO credit_ledger (account_id, kind, generation_id, subscription_delta, one_time_delta, reason)
  VALUES (generation.account_id, 'debit', generation.id, -from_subscription, -(p_price - from_subscription),
          'generation ' || generation.model);
  INSERT INTO api_key_spend AS s (api_key_id, day, credits)
  VALUES (generation.api_key_id, (now() AT TIME ZONE 'UTC')::date, p_price)
  ON CONFLICT (api_key_id, day) DO UPDATE SET credits = s.credits + EXCLUDED.credits;
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

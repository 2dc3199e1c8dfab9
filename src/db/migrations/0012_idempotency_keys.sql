-- Idempotency-Key records (issue 13). A keyed generation's workflow used to stay open for the
-- whole key horizon (180 days) only to hold its key; it now ends after content expiry, and the
-- key's record lives here until the horizon: written with the admission that claims the key (in
-- the same transaction), read by the API before it asks Temporal, and by every later admission
-- under the same key, so a request that meets a workflow which has just ended still answers for
-- the generation that holds the key. One record per API key and Idempotency-Key: once its horizon
-- has passed the key is new, and the next admission replaces the record (pruning deletes the rest).
CREATE TABLE idempotency_keys (
  api_key_id      text NOT NULL,
  idempotency_key text NOT NULL,
  -- The generation that answers for the key, and its request's fingerprint (another body: 409).
  generation_id   text NOT NULL,
  fingerprint     text NOT NULL,
  -- The generation's creation plus IDEMPOTENCY_RETENTION_MS.
  held_until      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (api_key_id, idempotency_key)
);
CREATE INDEX idempotency_keys_held_until ON idempotency_keys (held_until);

-- Pruning (the generation-pruning schedule) deletes in bounded batches, each found by an index.
CREATE INDEX generations_rejected_created ON generations (created_at) WHERE status = 'rejected';
CREATE INDEX sim_provider_jobs_submitted ON sim_provider_jobs (submitted_at);

-- admit_generation() (migration 0007) with a key claim. With `p_key` ({"held_until", "at"}: the
-- horizon, and the admitting workflow's clock), a key record held past `at` by another generation
-- answers instead of a new admission:
--   {"outcome": "key_held", "generation_id", "fingerprint", "held_until", "status", "credits", "error"}
-- and an accepted generation records its claim. Checked and written under the account's lock (an
-- API key belongs to one account), so one key never names two generations within its horizon.
-- A refusal that claims the key (insufficient credits) is recorded by the caller, with its record.
CREATE FUNCTION admit_generation(
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

  SELECT count(*) INTO in_progress FROM generations g
  WHERE g.account_id = generation.account_id AND g.status = 'queued';
  IF in_progress >= p_concurrency_limit THEN
    RETURN jsonb_build_object('outcome', 'concurrency_limit');
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
                           fingerprint, idempotency_key, provider_token, input_prefix, created_at)
  VALUES (generation.id, generation.account_id, generation.api_key_id, generation.workflow_id, 'queued',
          generation.model, generation.media_type, p_price, generation.input, generation.fingerprint,
          generation.idempotency_key, generation.provider_token, generation.input_prefix, generation.created_at);
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

-- The four-argument form (workers of the previous release, during a rolling deploy) records no key:
-- their workflows hold their keys open until the horizon, as before.
CREATE OR REPLACE FUNCTION admit_generation(
  p_generation        jsonb,
  p_price             integer,
  p_definition_digest text,
  p_concurrency_limit integer
) RETURNS jsonb LANGUAGE sql AS $$
  SELECT admit_generation(p_generation, p_price, p_definition_digest, p_concurrency_limit, NULL::jsonb)
$$;

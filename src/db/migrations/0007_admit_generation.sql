-- Admission's atomic part in one round trip: the account's lock, the concurrency
-- slot, the check that the price was quoted from the model's current catalog
-- entry, the balance, and the debit (subscription credits first) with its ledger
-- row and the generation's record. The worker quotes the price (the catalog's
-- pricing rules are TypeScript) and words any refusal; this function decides.
--
-- One call instead of a transaction of several statements: the account's lock
-- is held for the length of this call, not across round trips from the worker,
-- and PL/pgSQL keeps its statements' plans.
--
-- Returns one of:
--   {"outcome": "existing", "status", "credits", "error"}  decided before (a retry)
--   {"outcome": "concurrency_limit"}
--   {"outcome": "requote", "definition", "digest"}        the model's entry changed
--   {"outcome": "unavailable"}                            no active model, or no price
--   {"outcome": "insufficient_credits", "available"}
--   {"outcome": "accepted", "credits"}
-- Refusals write nothing; the caller words and records them. The generation's row
-- is the decision: whichever attempt writes it first decides (an accepted insert
-- here fails if a refusal was recorded meanwhile, and the caller's refusal insert
-- yields to an acceptance), and every later attempt replays it ("existing").
CREATE FUNCTION admit_generation(
  p_generation        jsonb,   -- the generations row to insert: id, account_id, api_key_id, workflow_id, model,
                               -- media_type, input, fingerprint, idempotency_key, provider_token, input_prefix, created_at
  p_price             integer, -- quoted from the entry whose digest follows (null: the entry has no price)
  p_definition_digest text,    -- md5 of the definition the price was quoted from (null: none known)
  p_concurrency_limit integer
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  generation           generations%ROWTYPE := jsonb_populate_record(NULL::generations, p_generation);
  existing             record;
  in_progress          integer;
  model                record;
  subscription_balance bigint;
  one_time_balance     bigint;
  from_subscription    bigint;
BEGIN
  -- Admissions of one account are decided one at a time. Every statement below takes a fresh
  -- snapshot, so it sees what the admission before this one committed. NO KEY UPDATE leaves
  -- inserts that merely reference the account (gallery images) free to go on.
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
  RETURN jsonb_build_object('outcome', 'accepted', 'credits', p_price);
END $$;

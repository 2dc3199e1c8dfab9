-- Spend controls on keys (issue 46): every API key, and every app connected over OAuth (a key row
-- of kind 'oauth'), can carry a credit limit per window, an allow-list of models and read-only
-- access. The limit is checked by admit_generation(), in the statement that debits, under the
-- account's lock: concurrent admissions on every API process are serialised there, so a key never
-- spends past its limit.
ALTER TABLE api_keys
  ADD COLUMN spend_limit integer CHECK (spend_limit >= 0),
  ADD COLUMN limit_reset text NOT NULL DEFAULT 'none'
    CHECK (limit_reset IN ('daily', 'weekly', 'monthly', 'none')),
  ADD COLUMN models text[] CHECK (models IS NULL OR array_position(models, NULL) IS NULL),
  ADD COLUMN access text NOT NULL DEFAULT 'full' CHECK (access IN ('full', 'read_only'));

-- What each key spent, per UTC day, net of refunds: a window's spend is the sum of its days. A
-- refund gives its credits back to the day its debit was counted on (trigger below), so it counts
-- in the current window exactly when the debit did.
CREATE TABLE api_key_spend (
  api_key_id text NOT NULL REFERENCES api_keys (id),
  day        date NOT NULL,
  credits    bigint NOT NULL,
  PRIMARY KEY (api_key_id, day)
);

INSERT INTO api_key_spend (api_key_id, day, credits)
SELECT g.api_key_id, (d.created_at AT TIME ZONE 'UTC')::date,
       sum(-(d.subscription_delta + d.one_time_delta) - coalesce(r.subscription_delta + r.one_time_delta, 0))
FROM credit_ledger d
JOIN generations g ON g.id = d.generation_id
LEFT JOIN credit_ledger r ON r.refund_of = d.id
WHERE d.kind = 'debit'
GROUP BY 1, 2;

-- The window a limit counts in, at `at`: a UTC day, an ISO week (Monday to Sunday) or a calendar
-- month; with no reset, every day (starts NULL) and no end.
CREATE FUNCTION key_limit_window(p_reset text, p_at timestamptz, OUT starts date, OUT resets_at timestamptz)
LANGUAGE sql IMMUTABLE AS $$
  SELECT w::date, CASE WHEN w IS NULL THEN NULL ELSE (w + step) AT TIME ZONE 'UTC' END
  FROM (SELECT CASE p_reset WHEN 'daily' THEN date_trunc('day', p_at AT TIME ZONE 'UTC')
                            WHEN 'weekly' THEN date_trunc('week', p_at AT TIME ZONE 'UTC')
                            WHEN 'monthly' THEN date_trunc('month', p_at AT TIME ZONE 'UTC') END AS w,
               CASE p_reset WHEN 'daily' THEN interval '1 day' WHEN 'weekly' THEN interval '1 week'
                            ELSE interval '1 month' END AS step) t
$$;

-- A key's spend since `p_starts` (NULL: ever).
CREATE FUNCTION key_spend_in(p_key text, p_starts date) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(credits), 0)::bigint FROM api_key_spend
  WHERE api_key_id = p_key AND (p_starts IS NULL OR day >= p_starts)
$$;

CREATE FUNCTION refund_key_spend() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE api_key_spend s SET credits = s.credits - (NEW.subscription_delta + NEW.one_time_delta)
  FROM credit_ledger d JOIN generations g ON g.id = d.generation_id
  WHERE d.id = NEW.refund_of AND s.api_key_id = g.api_key_id
    AND s.day = (d.created_at AT TIME ZONE 'UTC')::date;
  RETURN NULL;
END $$;
CREATE TRIGGER credit_ledger_refund_key_spend AFTER INSERT ON credit_ledger
  FOR EACH ROW WHEN (NEW.kind = 'refund') EXECUTE FUNCTION refund_key_spend();

-- A key's events, in the account's event log beside its generations' and batches': for now one,
-- key.spend_limit_reached, written when the key's first refusal in a window happens.
CREATE TABLE key_events (
  api_key_id   text NOT NULL REFERENCES api_keys (id),
  seq          integer NOT NULL CHECK (seq > 0),
  type         text NOT NULL CHECK (type ~ '^key\.[a-z_]+$'),
  window_start date NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  resource     jsonb NOT NULL,
  PRIMARY KEY (api_key_id, seq),
  UNIQUE (api_key_id, type, window_start)
);

ALTER TABLE account_events
  ADD COLUMN key_id text,
  ADD COLUMN key_seq integer,
  ADD CONSTRAINT account_events_key_event_key UNIQUE (key_id, key_seq),
  ADD CONSTRAINT account_events_key_event_fkey FOREIGN KEY (key_id, key_seq)
    REFERENCES key_events (api_key_id, seq) ON DELETE CASCADE,
  DROP CONSTRAINT account_events_one_subject,
  ADD CONSTRAINT account_events_one_subject CHECK (num_nonnulls(generation_id, batch_id, key_id) = 1
    AND (generation_id IS NULL) = (generation_seq IS NULL) AND (batch_id IS NULL) = (batch_seq IS NULL)
    AND (key_id IS NULL) = (key_seq IS NULL));

CREATE FUNCTION append_key_account_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  account       text := NEW.resource->>'account_id';
  next_position bigint;
BEGIN
  INSERT INTO account_event_heads AS h (account_id, last_position) VALUES (account, 1)
  ON CONFLICT (account_id) DO UPDATE SET last_position = h.last_position + 1
  RETURNING h.last_position INTO next_position;
  INSERT INTO account_events (account_id, position, key_id, key_seq)
  VALUES (account, next_position, NEW.api_key_id, NEW.seq);
  PERFORM pg_notify('account_event', account);
  RETURN NULL;
END $$;
CREATE TRIGGER key_events_append_account_event AFTER INSERT ON key_events
  FOR EACH ROW EXECUTE FUNCTION append_key_account_event();

-- key.spend_limit_reached, once per key and window (the caller holds the account's lock).
CREATE FUNCTION record_spend_limit_reached(p_account text, p_key text, p_window date, p_key_state jsonb)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO key_events (api_key_id, seq, type, window_start, resource)
  SELECT p_key, coalesce((SELECT max(seq) FROM key_events WHERE api_key_id = p_key), 0) + 1,
         'key.spend_limit_reached', coalesce(p_window, '-infinity'::date),
         p_key_state || jsonb_build_object('account_id', p_account)
  ON CONFLICT (api_key_id, type, window_start) DO NOTHING
$$;

-- admit_generation() (0028) whole, with the key's rules: a model outside its list is refused
-- (model_not_allowed), then, past the balance, a price over what is left of its limit
-- (key_spend_limit); a debit counts on the key's day.
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

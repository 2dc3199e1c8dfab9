-- The request budget of each provider account (issue 47), shared by every worker when REDIS_URL is
-- not set (with it, the same rule is kept in Redis). Two allowances per account, creates and every
-- other request, each a GCRA schedule: the time the next turn is counted from (its "theoretical
-- arrival time"); and the pause a provider's 429 imposes on every call (fallback reads longer).
CREATE TABLE provider_budgets (
  provider              text PRIMARY KEY,
  create_turn           timestamptz NOT NULL DEFAULT '-infinity',
  other_turn            timestamptz NOT NULL DEFAULT '-infinity',
  paused_until          timestamptz NOT NULL DEFAULT '-infinity',
  fallback_paused_until timestamptz NOT NULL DEFAULT '-infinity'
);

-- One request's turn, under the account row's lock (concurrent workers are serialised here): the
-- arithmetic of decideTurn() in src/providers/budget-memory-store.ts. p_emission_ms NULL: the
-- allowance has no limit (only a pause applies). p_fallback_share NULL: not a fallback read.
-- Granted: the turn is taken, go after wait_ms. Refused: nothing taken, a turn in wait_ms.
CREATE FUNCTION take_provider_turn(
  p_provider        text,
  p_class           text,
  p_emission_ms     double precision,
  p_tolerance_ms    double precision,
  p_max_wait_ms     double precision,
  p_fallback_share  double precision,
  OUT granted       boolean,
  OUT wait_ms       double precision
) LANGUAGE plpgsql AS $$
DECLARE
  b        provider_budgets%ROWTYPE;
  now_at   timestamptz;
  paused   timestamptz;
  start_at timestamptz;
  turn     timestamptz;
  over     double precision;
BEGIN
  IF p_class IS NULL OR p_class NOT IN ('create', 'other') THEN
    RAISE EXCEPTION 'take_provider_turn: no class %', p_class;
  END IF;
  SELECT * INTO b FROM provider_budgets WHERE provider = p_provider FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO provider_budgets (provider) VALUES (p_provider) ON CONFLICT DO NOTHING;
    SELECT * INTO b FROM provider_budgets WHERE provider = p_provider FOR UPDATE;
  END IF;
  -- Read after the lock: a worker that waited for it counts from now, not from before.
  now_at := clock_timestamp();
  paused := CASE WHEN p_fallback_share IS NULL THEN b.paused_until ELSE b.fallback_paused_until END;
  IF p_fallback_share IS NOT NULL AND paused > now_at THEN
    granted := false;
    wait_ms := extract(epoch FROM paused - now_at) * 1000;
    RETURN;
  END IF;
  start_at := greatest(now_at, paused);
  IF p_emission_ms IS NULL THEN
    wait_ms := extract(epoch FROM start_at - now_at) * 1000;
    granted := wait_ms <= p_max_wait_ms;
    RETURN;
  END IF;
  turn := greatest(CASE p_class WHEN 'create' THEN b.create_turn ELSE b.other_turn END, start_at);
  wait_ms := extract(epoch FROM greatest(turn - make_interval(secs => p_tolerance_ms / 1000), start_at) - now_at) * 1000;
  IF p_fallback_share IS NOT NULL THEN
    over := extract(epoch FROM turn - now_at) * 1000 + p_emission_ms
            - p_fallback_share * (p_tolerance_ms + p_emission_ms);
    IF over > 0.001 THEN
      granted := false;
      wait_ms := over;
      RETURN;
    END IF;
  ELSIF wait_ms > p_max_wait_ms THEN
    granted := false;
    RETURN;
  END IF;
  turn := turn + make_interval(secs => p_emission_ms / 1000);
  IF p_class = 'create' THEN
    UPDATE provider_budgets SET create_turn = turn WHERE provider = p_provider;
  ELSE
    UPDATE provider_budgets SET other_turn = turn WHERE provider = p_provider;
  END IF;
  granted := true;
END $$;

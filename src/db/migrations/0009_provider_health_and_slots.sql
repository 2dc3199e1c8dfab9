-- Real providers (issue 12): whether each provider is up, shared by every API and worker process,
-- and the jobs each provider account has in flight.

-- A provider is `down` after repeated failures (unreachable, 5xx, refused credentials; never a 429
-- or a rejected input): API processes then refuse new POSTs for its models before the debit, with
-- 503 and Retry-After, until a worker's probe (or a call that succeeds) finds it up again.
CREATE TABLE provider_health (
  provider             text PRIMARY KEY,
  state                text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'down')),
  consecutive_failures integer NOT NULL DEFAULT 0,
  last_error           text,
  last_failure_at      timestamptz,
  down_since           timestamptz,
  -- While down: when the next probe is due (and what Retry-After says).
  probe_at             timestamptz,
  updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION notify_provider_health_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('provider_health_changed', NEW.provider);
  RETURN NULL;
END $$;
-- Only a change of state is announced: counting failures while up concerns no API process.
CREATE TRIGGER provider_health_changed AFTER INSERT OR UPDATE OF state, probe_at ON provider_health
  FOR EACH ROW EXECUTE FUNCTION notify_provider_health_changed();

-- One row per generation whose job holds one of its provider account's in-flight places: taken
-- just before the create is sent, given back when the provider's job ends (or the generation does).
CREATE TABLE provider_slots (
  generation_id text PRIMARY KEY REFERENCES generations (id),
  provider      text NOT NULL,
  taken_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_slots_by_provider ON provider_slots (provider);

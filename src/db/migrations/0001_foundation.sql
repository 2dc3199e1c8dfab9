-- Accounts, purchases, API keys, credits, the model catalog, the generations
-- projection, the API request log and the gallery. Shared with the companion
-- web app: the rules that must hold whoever writes live here as constraints
-- and triggers, not only in our code.

CREATE TABLE accounts (
  id                 text PRIMARY KEY CHECK (id ~ '^acct_[A-Za-z0-9]+$'),
  email              text NOT NULL UNIQUE,
  name               text,
  api_access_enabled boolean NOT NULL DEFAULT true,
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE purchases (
  id           text PRIMARY KEY CHECK (id ~ '^pur_[A-Za-z0-9]+$'),
  account_id   text NOT NULL REFERENCES accounts (id),
  kind         text NOT NULL CHECK (kind IN ('credit_pack', 'monthly_subscription', 'yearly_subscription', 'gift')),
  status       text NOT NULL CHECK (status IN ('pending', 'completed', 'failed', 'refunded')),
  credits      integer NOT NULL DEFAULT 0 CHECK (credits >= 0),
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  CHECK (status <> 'completed' OR completed_at IS NOT NULL)
);
CREATE INDEX purchases_account ON purchases (account_id);

-- Keys are stored as the SHA-256 of the whole key (hex); the plaintext is never kept.
CREATE TABLE api_keys (
  id             text PRIMARY KEY CHECK (id ~ '^key_[A-Za-z0-9]+$'),
  account_id     text NOT NULL REFERENCES accounts (id),
  key_sha256     text NOT NULL UNIQUE CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
  display_prefix text NOT NULL,
  name           text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  revoked_at     timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id) WHERE revoked_at IS NULL;

-- At most 5 active keys per account, whoever inserts. The account row lock
-- serialises concurrent creations for one account.
CREATE FUNCTION api_keys_enforce_active_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM accounts WHERE id = NEW.account_id FOR UPDATE;
  IF NEW.revoked_at IS NULL AND
     (SELECT count(*) FROM api_keys WHERE account_id = NEW.account_id AND revoked_at IS NULL AND id <> NEW.id) >= 5 THEN
    RAISE EXCEPTION 'an account has at most 5 active API keys' USING ERRCODE = 'check_violation',
      CONSTRAINT = 'api_keys_active_limit';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER api_keys_active_limit BEFORE INSERT OR UPDATE OF revoked_at ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_enforce_active_limit();

CREATE TABLE credit_balances (
  account_id           text PRIMARY KEY REFERENCES accounts (id),
  subscription_credits bigint NOT NULL DEFAULT 0 CHECK (subscription_credits >= 0),
  one_time_credits     bigint NOT NULL DEFAULT 0 CHECK (one_time_credits >= 0),
  updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Append-only. A generation has at most one debit and at most one refund, and
-- a refund names the debit it returns.
CREATE TABLE credit_ledger (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id         text NOT NULL REFERENCES accounts (id),
  kind               text NOT NULL CHECK (kind IN ('grant', 'debit', 'refund', 'adjustment')),
  generation_id      text,
  refund_of          bigint REFERENCES credit_ledger (id),
  subscription_delta bigint NOT NULL,
  one_time_delta     bigint NOT NULL,
  reason             text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind IN ('debit', 'refund')) = (generation_id IS NOT NULL)),
  CHECK ((kind = 'refund') = (refund_of IS NOT NULL)),
  CHECK (kind <> 'debit' OR (subscription_delta <= 0 AND one_time_delta <= 0)),
  CHECK (kind <> 'refund' OR (subscription_delta >= 0 AND one_time_delta >= 0))
);
CREATE UNIQUE INDEX credit_ledger_one_debit ON credit_ledger (generation_id) WHERE kind = 'debit';
CREATE UNIQUE INDEX credit_ledger_one_refund ON credit_ledger (generation_id) WHERE kind = 'refund';
CREATE UNIQUE INDEX credit_ledger_refund_of ON credit_ledger (refund_of);
CREATE INDEX credit_ledger_account ON credit_ledger (account_id, id);

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'credit_ledger is append-only' USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER credit_ledger_no_update BEFORE UPDATE OR DELETE ON credit_ledger
  FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();

-- The model catalog. `definition` is validated by the service's catalog schema
-- (src/catalog/catalog-entry.ts) when loaded; the web app edits prices here.
CREATE TABLE models (
  id         text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9.-]*$'),
  media_type text NOT NULL CHECK (media_type IN ('image', 'video')),
  definition jsonb NOT NULL,
  active     boolean NOT NULL DEFAULT true,
  sort_order integer NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- The read projection of each generation, written only by its workflow.
CREATE TABLE generations (
  id                text PRIMARY KEY CHECK (id ~ '^gen_[A-Za-z0-9]+$'),
  account_id        text NOT NULL REFERENCES accounts (id),
  api_key_id        text REFERENCES api_keys (id),
  workflow_id       text,
  status            text NOT NULL CHECK (status IN ('queued', 'succeeded', 'failed', 'rejected')),
  model             text NOT NULL,
  media_type        text NOT NULL,
  credits           integer NOT NULL DEFAULT 0 CHECK (credits >= 0),
  credits_refunded  boolean NOT NULL DEFAULT false,
  input             jsonb,
  output            jsonb,
  error             jsonb,
  needs_review      boolean NOT NULL DEFAULT false,
  content_expired   boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz,
  expires_at        timestamptz,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX generations_account_created ON generations (account_id, created_at DESC, id DESC);
CREATE INDEX generations_account_status_created ON generations (account_id, status, created_at DESC, id DESC);
CREATE INDEX generations_needs_review ON generations (id) WHERE needs_review;

-- Every request made with a recognised key, rejected ones included. Written in
-- batches (COPY) off the request path. account_id and api_key_id are not
-- foreign keys on purpose: checking them locks the key's row for every logged
-- request, which was most of the cost of logging, and the ids come from keys
-- the API has just resolved.
CREATE TABLE api_request_log (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id  text NOT NULL,
  api_key_id  text NOT NULL,
  request_id  text NOT NULL,
  method      text NOT NULL,
  path        text NOT NULL,
  status_code integer NOT NULL,
  error_code  text,
  ip          text,
  user_agent  text,
  duration_ms real NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX api_request_log_account ON api_request_log (account_id, created_at DESC);

-- Persisted image results, shown in the web app's gallery.
CREATE TABLE gallery_images (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id),
  generation_id text NOT NULL REFERENCES generations (id),
  url           text NOT NULL,
  width         integer NOT NULL,
  height        integer NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (generation_id, url)
);
CREATE INDEX gallery_images_account ON gallery_images (account_id, created_at DESC);

-- API processes cache resolved keys; any change that affects who may call the
-- API is pushed to them at once so a revoked key fails on its next request.
CREATE FUNCTION notify_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('auth_changed', COALESCE(NEW.account_id, OLD.account_id));
  RETURN NULL;
END $$;
CREATE FUNCTION notify_auth_changed_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('auth_changed', COALESCE(NEW.id, OLD.id));
  RETURN NULL;
END $$;
CREATE TRIGGER api_keys_auth_changed AFTER INSERT OR UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION notify_auth_changed();
CREATE TRIGGER purchases_auth_changed AFTER INSERT OR UPDATE OR DELETE ON purchases
  FOR EACH ROW EXECUTE FUNCTION notify_auth_changed();
CREATE TRIGGER accounts_auth_changed AFTER UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION notify_auth_changed_account();

CREATE FUNCTION notify_catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('catalog_changed', '');
  RETURN NULL;
END $$;
CREATE TRIGGER models_catalog_changed AFTER INSERT OR UPDATE OR DELETE ON models
  FOR EACH STATEMENT EXECUTE FUNCTION notify_catalog_changed();

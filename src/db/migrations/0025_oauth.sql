-- OAuth 2.1 for chat apps (issue 37 §3): the console is the authorization server (oidc-provider),
-- its storage is here.
--
-- oauth_store is oidc-provider's adapter table: one row per model (AccessToken, RefreshToken,
-- AuthorizationCode, Client, Grant, Interaction, Session, ...) and id. Ids are stored only as their
-- SHA-256 (a token's id is the token itself), and the payload never holds the id in clear. grant_id,
-- uid and user_code are the adapter's look-ups; consumed_at marks a used code or rotated refresh
-- token; expires_at is when the row may go (NULL: kept until destroyed; a registered client no
-- grant uses goes after a week, see pruning).
CREATE TABLE oauth_store (
  model       text NOT NULL,
  id_sha256   text NOT NULL CHECK (id_sha256 ~ '^[0-9a-f]{64}$'),
  payload     jsonb NOT NULL,
  grant_id    text,
  uid_sha256  text CHECK (uid_sha256 ~ '^[0-9a-f]{64}$'),
  user_code_sha256 text CHECK (user_code_sha256 ~ '^[0-9a-f]{64}$'),
  consumed_at timestamptz,
  expires_at  timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (model, id_sha256)
);
CREATE INDEX oauth_store_grant ON oauth_store (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX oauth_store_uid ON oauth_store (model, uid_sha256) WHERE uid_sha256 IS NOT NULL;
CREATE INDEX oauth_store_user_code ON oauth_store (model, user_code_sha256) WHERE user_code_sha256 IS NOT NULL;
CREATE INDEX oauth_store_expires ON oauth_store (expires_at) WHERE expires_at IS NOT NULL;

-- An API key row is a pasted key ('key') or the principal of one approved OAuth grant ('oauth'):
-- the grant's calls are then a key's calls to the rate limits, the paid-purchase rule, the request
-- log and the ledger. An 'oauth' row's key_sha256 is the hash of random bytes nobody was given, and
-- a key is only ever looked up among 'key' rows, so it can never be presented as a key.
ALTER TABLE api_keys ADD COLUMN kind text NOT NULL DEFAULT 'key' CHECK (kind IN ('key', 'oauth'));

-- The 5-key limit counts pasted keys only; an account's connected apps are not keys it manages.
CREATE OR REPLACE FUNCTION api_keys_enforce_active_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind <> 'key' THEN
    RETURN NEW;
  END IF;
  PERFORM 1 FROM accounts WHERE id = NEW.account_id FOR UPDATE;
  IF NEW.revoked_at IS NULL AND
     (SELECT count(*) FROM api_keys WHERE account_id = NEW.account_id AND kind = 'key'
        AND revoked_at IS NULL AND id <> NEW.id) >= 5 THEN
    RAISE EXCEPTION 'an account has at most 5 active API keys' USING ERRCODE = 'check_violation',
      CONSTRAINT = 'api_keys_active_limit';
  END IF;
  RETURN NEW;
END $$;

-- One approved app per account and client ("Connected apps"): the grant oidc-provider keeps (its
-- Grant row in oauth_store), the API key row its tokens act as, and what the person approved.
-- Revoking sets revoked_at here and on the key row (the API's caches hear it at once) and deletes
-- every token of the grant.
CREATE TABLE oauth_grants (
  grant_id    text NOT NULL PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  api_key_id  text NOT NULL UNIQUE REFERENCES api_keys (id),
  client_id   text NOT NULL,
  client_name text,
  resource    text NOT NULL,
  scope       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX oauth_grants_account ON oauth_grants (account_id, created_at DESC);
CREATE UNIQUE INDEX oauth_grants_live_client ON oauth_grants (account_id, client_id) WHERE revoked_at IS NULL;

-- The authorization server's own secrets, made once by the first console that needs them: the
-- signing keys (a JWK set) and the cookie keys. Deleting a row makes a new one at the next start.
CREATE TABLE oauth_server_secrets (
  name       text NOT NULL PRIMARY KEY CHECK (name IN ('jwks', 'cookie_keys')),
  value      jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

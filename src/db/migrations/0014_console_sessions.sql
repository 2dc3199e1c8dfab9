-- The account console's sign-ins. A session is bound to the API key it was opened with: the
-- browser holds only a random 256-bit id, stored here as its SHA-256 (hex), so a copy of this
-- table opens nothing. Whether the session may still act is judged on each request from the key
-- and the account, like an API request, so revoking the key or disabling access ends it at once.
CREATE TABLE console_sessions (
  id_sha256    text PRIMARY KEY CHECK (id_sha256 ~ '^[0-9a-f]{64}$'),
  account_id   text NOT NULL REFERENCES accounts (id),
  api_key_id   text NOT NULL REFERENCES api_keys (id),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_key ON console_sessions (api_key_id);
CREATE INDEX console_sessions_last_seen ON console_sessions (last_seen_at);

-- One-time sign-in links made by support (`npm run admin -- console-link`): single use, short-lived.
CREATE TABLE console_sign_in_links (
  token_sha256 text PRIMARY KEY CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
  account_id   text NOT NULL REFERENCES accounts (id),
  api_key_id   text NOT NULL REFERENCES api_keys (id),
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  used_at      timestamptz
);

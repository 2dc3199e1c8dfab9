-- Each account's webhook signing secret (issue 30, Standard Webhooks 1.0): `whsec_` + base64 of
-- random bytes. Kept as it is, not hashed: deliveries are signed with it (HMAC), so the service
-- must be able to read it back; it is not an API key and authenticates nothing here. Made on
-- first read. A rotation keeps the previous secret for 24 h, while deliveries carry both signatures.
CREATE TABLE webhook_secrets (
  account_id      text PRIMARY KEY REFERENCES accounts (id),
  secret          text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9+/]{32,}={0,2}$'),
  previous_secret text CHECK (previous_secret ~ '^whsec_[A-Za-z0-9+/]{32,}={0,2}$'),
  previous_until  timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((previous_secret IS NULL) = (previous_until IS NULL))
);

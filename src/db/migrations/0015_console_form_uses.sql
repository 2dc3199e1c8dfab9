-- Forms of the account console that must act once (creating an API key): each rendered form
-- carries a random id, stored here as its SHA-256 when the form is first sent, in the same
-- transaction as what it does. A reload or a double click sends the same id again and is told
-- what the first sending did, instead of doing it twice. Pruned after a day.
CREATE TABLE console_form_uses (
  form_sha256 text PRIMARY KEY CHECK (form_sha256 ~ '^[0-9a-f]{64}$'),
  account_id  text NOT NULL REFERENCES accounts (id),
  api_key_id  text REFERENCES api_keys (id),
  used_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_form_uses_used_at ON console_form_uses (used_at);

-- Pruning finds expired sign-in links by their expiry.
CREATE INDEX console_sign_in_links_expires_at ON console_sign_in_links (expires_at);

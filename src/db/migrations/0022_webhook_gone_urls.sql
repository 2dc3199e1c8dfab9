-- 410 Gone stops deliveries to that URL (issue 30 §3), not only the generation's that got it: a
-- receiver's 410 is recorded here, per account and URL, in the statement that marks the answered
-- subscription gone. Every subscription of the account to that URL made at or before `gone_at`
-- (pending retries, events still to come) ends as gone without being sent; one made after it (a
-- generation created later with that URL) is delivered: the receiver is back. A later 410 moves
-- `gone_at` on. An owner's or support's redelivery is sent regardless (an explicit act).
CREATE TABLE webhook_gone_urls (
  account_id text NOT NULL REFERENCES accounts (id),
  url        text NOT NULL,
  gone_at    timestamptz NOT NULL,
  PRIMARY KEY (account_id, url)
);

-- Deliveries in flight per account (issue 35 §3): each webhook delivery attempt takes one of its
-- account's turns (WEBHOOK_DELIVERIES_PER_ACCOUNT at once, across workers) for as long as it
-- runs; the others wait here, oldest first, and none is dropped. A row is one delivery asking:
-- waiting (held_until NULL) or holding its turn (until held_until: a worker lost mid-attempt
-- gives it back then). `holder` names the delivery (`<generation id>/<event seq>`, and
-- `/redelivery` for one asked for again). A waiter not seen for minutes (its workflow is gone)
-- loses its place. Rows go with their generation.
CREATE TABLE webhook_delivery_turns (
  holder        text NOT NULL PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id),
  generation_id text NOT NULL REFERENCES generations (id) ON DELETE CASCADE,
  waiting_since timestamptz NOT NULL DEFAULT now(),
  seen_at       timestamptz NOT NULL DEFAULT now(),
  held_until    timestamptz
);
CREATE INDEX webhook_delivery_turns_account ON webhook_delivery_turns (account_id, waiting_since);
CREATE INDEX webhook_delivery_turns_generation ON webhook_delivery_turns (generation_id);

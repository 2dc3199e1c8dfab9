-- A batch's own webhook (issue 38): POST /v1/batches `webhook` subscribes to the batch's events
-- (batch.created, batch.progress, batch.completed/canceled/expired). They are delivered by the same
-- delivery workflow as a generation's (`webhooks-<batch id>`), with the same signing, retries, 410
-- Gone rule, turns and redelivery: a delivery's subject is a generation or a batch, and its
-- attempts and turns name one of the two.
CREATE TABLE batch_webhooks (
  batch_id   text PRIMARY KEY REFERENCES batches (id) ON DELETE CASCADE,
  url        text NOT NULL,
  events     text[] NOT NULL CHECK (cardinality(events) > 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  gone_at    timestamptz
);

ALTER TABLE webhook_delivery_attempts
  ALTER COLUMN generation_id DROP NOT NULL,
  ADD COLUMN batch_id text REFERENCES batches (id) ON DELETE CASCADE,
  ADD CONSTRAINT webhook_delivery_attempts_one_subject CHECK (num_nonnulls(generation_id, batch_id) = 1);
CREATE INDEX webhook_delivery_attempts_batch ON webhook_delivery_attempts (batch_id, event_seq, id)
  WHERE batch_id IS NOT NULL;

ALTER TABLE webhook_delivery_turns
  ALTER COLUMN generation_id DROP NOT NULL,
  ADD COLUMN batch_id text REFERENCES batches (id) ON DELETE CASCADE,
  ADD CONSTRAINT webhook_delivery_turns_one_subject CHECK (num_nonnulls(generation_id, batch_id) = 1);

-- A batch's event wakes its own streams (GET /v1/batches/{id}/events) by naming the batch, as
-- `generation_event` names a generation; `account_event` (0026) still wakes the account's.
CREATE FUNCTION notify_batch_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('batch_event', NEW.batch_id);
  RETURN NULL;
END $$;

CREATE TRIGGER batch_events_notify AFTER INSERT ON batch_events
  FOR EACH ROW EXECUTE FUNCTION notify_batch_event();

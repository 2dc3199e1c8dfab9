-- One event log per generation (issue 30): every change a customer can see, numbered within the
-- generation (1, 2, 3…), with its type, its time and the generation's public fields as they were.
-- A trigger writes it, so the event commits or rolls back with the change it reports, whichever
-- statement made it (admission's function, results, refunds, review, expiry, support). It feeds
-- GET /v1/generations/{id}/events (woken by `generation_event`) and, later, webhook deliveries.
CREATE TABLE generation_events (
  generation_id text NOT NULL REFERENCES generations (id) ON DELETE CASCADE,
  seq           integer NOT NULL CHECK (seq > 0),
  type          text NOT NULL CHECK (type ~ '^generation\.[a-z_]+$'),
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- The columns generation-view.ts renders (generationColumns), as they were after the change.
  resource      jsonb NOT NULL,
  PRIMARY KEY (generation_id, seq)
);

CREATE FUNCTION record_generation_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  event_type text;
  next_seq   integer;
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- A request refused at once never became a job: its only event says so.
    event_type := CASE NEW.status WHEN 'queued' THEN 'generation.created' ELSE 'generation.' || NEW.status END;
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    -- Back to queued: support resumed a generation that was in review.
    event_type := CASE NEW.status WHEN 'queued' THEN 'generation.requeued' ELSE 'generation.' || NEW.status END;
  ELSIF NEW.content_expired AND NOT OLD.content_expired THEN
    event_type := 'generation.content_expired';
  ELSIF NEW.credits_refunded AND NOT OLD.credits_refunded THEN
    event_type := 'generation.refunded';
  ELSIF (OLD.account_id, OLD.model, OLD.media_type, OLD.credits, OLD.input, OLD.output, OLD.error,
         OLD.created_at, OLD.completed_at, OLD.expires_at)
        IS DISTINCT FROM
        (NEW.account_id, NEW.model, NEW.media_type, NEW.credits, NEW.input, NEW.output, NEW.error,
         NEW.created_at, NEW.completed_at, NEW.expires_at) THEN
    event_type := 'generation.updated';
  ELSIF OLD.provider_job_id IS NULL AND NEW.provider_job_id IS NOT NULL AND NEW.status = 'queued' THEN
    -- Not a field of the resource, but what a waiting customer wants to know: the provider has the job.
    event_type := 'generation.processing';
  ELSE
    RETURN NULL;
  END IF;
  IF NEW.content_expired AND TG_OP = 'UPDATE' AND NOT OLD.content_expired THEN
    -- Expiry removes the content from the log too: past events no longer carry input or output.
    UPDATE generation_events SET resource = resource || '{"input": null, "output": null}'::jsonb
    WHERE generation_id = NEW.id;
  END IF;
  -- Concurrent changes of one generation are serialized by its row lock, and this statement sees
  -- the events the previous holder committed; the primary key is the guard all the same.
  SELECT coalesce(max(seq), 0) + 1 INTO next_seq FROM generation_events WHERE generation_id = NEW.id;
  INSERT INTO generation_events (generation_id, seq, type, resource)
  VALUES (NEW.id, next_seq, event_type, jsonb_build_object(
    'id', NEW.id, 'account_id', NEW.account_id, 'status', NEW.status, 'model', NEW.model,
    'media_type', NEW.media_type, 'credits', NEW.credits, 'credits_refunded', NEW.credits_refunded,
    'input', NEW.input, 'output', NEW.output, 'error', NEW.error, 'needs_review', NEW.needs_review,
    'content_expired', NEW.content_expired, 'created_at', NEW.created_at, 'completed_at', NEW.completed_at,
    'expires_at', NEW.expires_at));
  PERFORM pg_notify('generation_event', NEW.id);
  RETURN NULL;
END $$;

CREATE TRIGGER generations_record_event_insert AFTER INSERT ON generations
  FOR EACH ROW EXECUTE FUNCTION record_generation_event();
CREATE TRIGGER generations_record_event AFTER UPDATE ON generations
  FOR EACH ROW
  WHEN ((OLD.account_id, OLD.status, OLD.model, OLD.media_type, OLD.credits, OLD.credits_refunded, OLD.input,
         OLD.output, OLD.error, OLD.content_expired, OLD.created_at, OLD.completed_at, OLD.expires_at)
        IS DISTINCT FROM
        (NEW.account_id, NEW.status, NEW.model, NEW.media_type, NEW.credits, NEW.credits_refunded, NEW.input,
         NEW.output, NEW.error, NEW.content_expired, NEW.created_at, NEW.completed_at, NEW.expires_at)
        OR (OLD.provider_job_id IS NULL AND NEW.provider_job_id IS NOT NULL))
  EXECUTE FUNCTION record_generation_event();

-- Routing across providers (issue 29). A model may be served by several routes (providers); a
-- generation tries them in the order admission planned, moving on only when a route proved it did
-- not take the job. `route_position` is the plan position the submit claim covers: the claim of
-- position n is taken only while it is n, and it moves on in the same statement that records the
-- end of route n, so a worker killed between routes can never create on two. `provider` is the
-- provider of the route serving (or that served) the generation: null before a create left.
ALTER TABLE generations
  ADD COLUMN provider text,
  ADD COLUMN route_position integer NOT NULL DEFAULT 0 CHECK (route_position >= 0);

-- Every route attempt of a generation: which provider, its job (when it took one), and how it
-- ended (`accepted`: the provider has the job; `not_accepted`: proven not taken, `reason` says why).
CREATE TABLE route_attempts (
  generation_id   text NOT NULL REFERENCES generations (id) ON DELETE CASCADE,
  position        integer NOT NULL CHECK (position >= 0),
  route           integer NOT NULL CHECK (route >= 0),
  provider        text NOT NULL,
  provider_job_id text,
  outcome         text NOT NULL CHECK (outcome IN ('accepted', 'not_accepted')),
  reason          text,
  recorded_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (generation_id, position)
);

-- Reads show `provider` (generationColumns): a change to it drops the API's cached copy too.
DROP TRIGGER generations_changed ON generations;
CREATE TRIGGER generations_changed AFTER UPDATE ON generations FOR EACH ROW
  WHEN (old.account_id IS DISTINCT FROM new.account_id OR old.status IS DISTINCT FROM new.status
    OR old.model IS DISTINCT FROM new.model OR old.media_type IS DISTINCT FROM new.media_type
    OR old.credits IS DISTINCT FROM new.credits OR old.credits_refunded IS DISTINCT FROM new.credits_refunded
    OR old.input IS DISTINCT FROM new.input OR old.output IS DISTINCT FROM new.output
    OR old.error IS DISTINCT FROM new.error OR old.needs_review IS DISTINCT FROM new.needs_review
    OR old.content_expired IS DISTINCT FROM new.content_expired OR old.created_at IS DISTINCT FROM new.created_at
    OR old.completed_at IS DISTINCT FROM new.completed_at OR old.expires_at IS DISTINCT FROM new.expires_at
    OR old.provider IS DISTINCT FROM new.provider)
  EXECUTE FUNCTION notify_generation_changed();

-- Each event carries the generation as a read shows it, now with its `provider` (the whole function
-- as 0016 made it, and that one field more).
CREATE OR REPLACE FUNCTION record_generation_event()
 RETURNS trigger
 LANGUAGE plpgsql
AS $$
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
    'expires_at', NEW.expires_at, 'provider', NEW.provider));
  PERFORM pg_notify('generation_event', NEW.id);
  RETURN NULL;
END $$;

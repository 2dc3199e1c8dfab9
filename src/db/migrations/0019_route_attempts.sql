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

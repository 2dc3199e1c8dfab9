-- Announce a generation only when a column that GET /v1/generations/{id} shows
-- changed (generationRow in generations-repository.ts). Bookkeeping updates
-- (the submit claim, the provider's job id, the output folder) no longer make
-- every API process drop and re-read a record that still looks the same.
DROP TRIGGER generations_changed ON generations;
CREATE TRIGGER generations_changed AFTER UPDATE ON generations
  FOR EACH ROW
  WHEN ((OLD.account_id, OLD.status, OLD.model, OLD.media_type, OLD.credits, OLD.credits_refunded, OLD.input,
         OLD.output, OLD.error, OLD.needs_review, OLD.content_expired, OLD.created_at, OLD.completed_at,
         OLD.expires_at)
        IS DISTINCT FROM
        (NEW.account_id, NEW.status, NEW.model, NEW.media_type, NEW.credits, NEW.credits_refunded, NEW.input,
         NEW.output, NEW.error, NEW.needs_review, NEW.content_expired, NEW.created_at, NEW.completed_at,
         NEW.expires_at))
  EXECUTE FUNCTION notify_generation_changed();

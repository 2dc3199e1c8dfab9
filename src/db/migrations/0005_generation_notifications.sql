-- API processes cache generation records for GET /v1/generations/{id} (clients
-- poll every 2-3 s); every change to a record is announced so they drop it.
CREATE FUNCTION notify_generation_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('generation_changed', NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER generations_changed AFTER UPDATE ON generations
  FOR EACH ROW EXECUTE FUNCTION notify_generation_changed();

-- Handing a generation to its provider, once (issue 19, item 0): a submit claim is held by one
-- attempt (submit_claim, a random id per attempt), so that an attempt can free, re-mark or answer
-- only a claim that is still its own; an attempt that lost its claim (a later attempt took it over
-- after its window lapsed) can no longer send. submit_sent_at records that a create may have left
-- for the provider: it is set, under the claim, just before each create is sent, and only the
-- sender clears it, when the provider proved that nothing was created.
ALTER TABLE generations
  ADD COLUMN submit_claim   text,
  ADD COLUMN submit_sent_at timestamptz;

-- Claims taken before this migration may have sent their create: they read as sent.
UPDATE generations SET submit_sent_at = submit_attempted_at
WHERE submit_attempted_at IS NOT NULL AND submit_sent_at IS NULL;

-- A succeeded generation stays succeeded and is never refunded (issue 19, item 5): its provider
-- billed, its outputs are stored and its gallery rows are the account's. Whatever path tries
-- (a persist re-run that failed late, a support or reconciliation refund), the database refuses.
CREATE FUNCTION keep_generation_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'generation % has succeeded: it cannot be failed or refunded', OLD.id
    USING ERRCODE = 'check_violation';
END $$;

CREATE TRIGGER generations_keep_success
  BEFORE UPDATE OF status, credits_refunded ON generations
  FOR EACH ROW WHEN (OLD.status = 'succeeded' AND (NEW.status <> 'succeeded' OR NEW.credits_refunded))
  EXECUTE FUNCTION keep_generation_success();

CREATE FUNCTION refuse_refund_of_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM generations WHERE id = NEW.generation_id AND status = 'succeeded') THEN
    RAISE EXCEPTION 'generation % has succeeded: it cannot be refunded', NEW.generation_id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER credit_ledger_no_refund_of_success
  BEFORE INSERT ON credit_ledger
  FOR EACH ROW WHEN (NEW.kind = 'refund')
  EXECUTE FUNCTION refuse_refund_of_success();

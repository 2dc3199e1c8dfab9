-- API processes cache balances for GET /v1/credits; every change to a balance
-- is announced so they drop the account's entry at once.
CREATE FUNCTION notify_balance_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('balance_changed', COALESCE(NEW.account_id, OLD.account_id));
  RETURN NULL;
END $$;
CREATE TRIGGER credit_balances_changed AFTER INSERT OR UPDATE OR DELETE ON credit_balances
  FOR EACH ROW EXECUTE FUNCTION notify_balance_changed();

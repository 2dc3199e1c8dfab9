-- One event log per account (issue 35 §7): GET /v1/events streams every event of an account's
-- generations in one order that a single cursor resumes, on any API process, after any restart.
--
-- The order must be the order in which the events COMMIT: events of different generations are
-- written by separate transactions, and a number taken from a sequence says when a transaction
-- began writing, not when it committed (position 6 can be read while 5 is still uncommitted, and a
-- reader resuming after 6 would never see 5). So each account has a head row, and the trigger that
-- logs an event moves it on by one under that row's lock, which the transaction holds until it
-- commits: the next event of the account takes its position only after the previous one is
-- committed and visible. Whoever reads position n can therefore read every position below it.
--
-- The cost: a generation's change and the next change of another generation of the same account
-- commit one after the other (an account's admissions already do, under its accounts row lock);
-- different accounts never wait on each other. The lock is taken last in each transaction that
-- logs an event (the trigger of its one generation change), so it adds no lock-order cycle.
--
-- Entries point at the event they order rather than copy it; a batch's events (a later issue) get
-- a column of their own beside `generation_id`, and the check names exactly one.
CREATE TABLE account_event_heads (
  account_id    text PRIMARY KEY REFERENCES accounts (id),
  last_position bigint NOT NULL CHECK (last_position > 0)
);

CREATE TABLE account_events (
  account_id     text NOT NULL REFERENCES accounts (id),
  position       bigint NOT NULL CHECK (position > 0),
  generation_id  text,
  generation_seq integer,
  PRIMARY KEY (account_id, position),
  UNIQUE (generation_id, generation_seq),
  CONSTRAINT account_events_one_subject CHECK (num_nonnulls(generation_id) = 1
    AND (generation_id IS NULL) = (generation_seq IS NULL)),
  FOREIGN KEY (generation_id, generation_seq) REFERENCES generation_events (generation_id, seq) ON DELETE CASCADE
);

CREATE FUNCTION append_account_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  account       text := NEW.resource->>'account_id';
  next_position bigint;
BEGIN
  INSERT INTO account_event_heads AS h (account_id, last_position) VALUES (account, 1)
  ON CONFLICT (account_id) DO UPDATE SET last_position = h.last_position + 1
  RETURNING h.last_position INTO next_position;
  INSERT INTO account_events (account_id, position, generation_id, generation_seq)
  VALUES (account, next_position, NEW.generation_id, NEW.seq);
  -- Wakes the account's streams (GET /v1/events) on every API process.
  PERFORM pg_notify('account_event', account);
  RETURN NULL;
END $$;

-- The events logged before this migration, in the order they were made.
LOCK TABLE generation_events IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO account_events (account_id, position, generation_id, generation_seq)
SELECT resource->>'account_id',
       row_number() OVER (PARTITION BY resource->>'account_id' ORDER BY created_at, generation_id, seq),
       generation_id, seq
FROM generation_events;
INSERT INTO account_event_heads (account_id, last_position)
SELECT account_id, max(position) FROM account_events GROUP BY account_id;

CREATE TRIGGER generation_events_append_account_event AFTER INSERT ON generation_events
  FOR EACH ROW EXECUTE FUNCTION append_account_event();

-- While a create is on its way to the provider and its answer not back, later submit attempts of
-- the generation (the POST's second attempt, the background submission, on any worker) wait for it
-- instead of taking its silence for a lost answer. Cleared when the answer comes (whatever it is);
-- a worker that died mid-create leaves it to lapse.
ALTER TABLE generations ADD COLUMN submit_awaiting_until timestamptz;

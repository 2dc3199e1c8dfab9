-- The `fastest` routing policy reads each route's p50 over a model's recent successes
-- (route-durations.ts) when the API starts and every minute after: without an index that is a scan
-- of every generation ever kept. Only successes are read, so only they are indexed, by model then
-- completion time (the query's equality, then its range).
CREATE INDEX generations_succeeded_model_completed ON generations (model, completed_at)
  WHERE status = 'succeeded';

-- The processed-events pruner deletes records older than the de-duplication window in bounded batches,
-- oldest first: without an index on the time each batch would scan the whole table. (The outbox needs
-- none: published rows are found from the oldest id up, through the primary key.)
CREATE INDEX processed_events_processed_at_idx ON processed_events (processed_at);

-- Rows the broker refuses for good (too large, malformed, or the same non-transient error `attempts`
-- times) are parked by the relay: kept with why, no longer pending, so the rows after them flow.
-- `attempts` counts failed publishing attempts that were not transient; `last_error` says the last one.
ALTER TABLE outbox
    ADD COLUMN attempts   integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error text,
    ADD COLUMN parked_at  timestamptz;

-- The relay scans pending rows (neither published nor parked) in id order.
DROP INDEX outbox_unpublished_idx;
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE published_at IS NULL AND parked_at IS NULL;
CREATE INDEX outbox_parked_idx ON outbox (id) WHERE parked_at IS NOT NULL;
